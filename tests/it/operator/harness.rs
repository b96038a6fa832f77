//! Running nmo in-process for end-to-end tests, in a tokio runtime of its own so that a test
//! can crash it: dropping that runtime stops every task of the operator (watches, actors,
//! requests in flight) wherever it is, without any clean-up, as a killed process would.

use std::thread::JoinHandle;
use std::time::Duration;

use kube::Client;
use nmo::operator::{self, OperatorError, OperatorOptions};
use tokio::sync::oneshot;

/// A running operator.
pub struct Operator {
    stop: Option<oneshot::Sender<()>>,
    kill: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<(), OperatorError>>>,
}

/// Options for tests: no metrics or probe servers (ports would collide between tests).
pub fn test_options() -> OperatorOptions {
    OperatorOptions {
        metrics_bind_address: "0".into(),
        health_probe_bind_address: "0".into(),
        ..OperatorOptions::default()
    }
}

/// Logs of the operator in the test's output (shown for failing tests), filtered by RUST_LOG.
fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Several tests share the process: the first one installs the subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

impl Operator {
    /// Starts nmo with the client `make_client` builds inside the operator's runtime (a kube
    /// client's connection pool lives on the runtime that builds it).
    pub fn start(
        make_client: impl FnOnce() -> Client + Send + 'static,
        options: OperatorOptions,
    ) -> Operator {
        init_logs();
        let (stop, stopped) = oneshot::channel::<()>();
        let (kill, killed) = oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime for the operator");
            let outcome = runtime.block_on(async move {
                let client = make_client();
                let run = operator::run(client, options, async move {
                    let _ = stopped.await;
                });
                tokio::select! {
                    outcome = run => Some(outcome),
                    _ = killed => None,
                }
            });
            // Killed: abandon every task at once, as a crash would.
            runtime.shutdown_background();
            outcome.unwrap_or(Ok(()))
        });
        Operator {
            stop: Some(stop),
            kill: Some(kill),
            thread: Some(thread),
        }
    }

    /// Asks the operator to stop as SIGTERM would and waits for it.
    pub async fn stop(mut self) -> Result<(), OperatorError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.join().await
    }

    /// Kills the operator mid-flight, as a crash would.
    pub async fn kill(mut self) {
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(());
        }
        let _ = self.join().await;
    }

    async fn join(&mut self) -> Result<(), OperatorError> {
        let thread = self.thread.take().expect("joined once");
        let joined = tokio::time::timeout(
            Duration::from_secs(30),
            tokio::task::spawn_blocking(move || thread.join()),
        )
        .await;
        match joined {
            Ok(Ok(Ok(outcome))) => outcome,
            // The operator thread panicked: fail with its message.
            Ok(Ok(Err(panic))) => std::panic::resume_unwind(panic),
            Ok(Err(join)) => panic!("joining the operator thread failed: {join}"),
            Err(elapsed) => panic!("the operator did not stop within 30 s: {elapsed}"),
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        // A test that fails midway must not leave an operator running into the next test.
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(());
        }
    }
}

//! Running nmo in-process for end-to-end tests.
//!
//! Usually in a tokio runtime of its own, on its own thread, so that a test can crash it:
//! dropping that runtime stops every task of the operator (watches, actors, requests in
//! flight) wherever it is, without any clean-up, as a killed process would. Or, for tests that
//! capture nmo's spans with a thread-local subscriber, as a task of the test's own runtime.

use std::thread::JoinHandle;
use std::time::Duration;

use kube::Client;
use nmo::operator::{self, OperatorError, OperatorOptions};
use tokio::sync::oneshot;

/// How long a stop may take before the test fails.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// A running operator; killed when dropped.
pub struct Operator {
    stop: Option<oneshot::Sender<()>>,
    run: Run,
}

/// Where the operator runs.
enum Run {
    /// Its own runtime on its own thread (`kill` ends that runtime).
    Thread {
        kill: Option<oneshot::Sender<()>>,
        thread: Option<JoinHandle<Result<(), OperatorError>>>,
    },
    /// A task of the test's runtime.
    Task(Option<tokio::task::JoinHandle<Result<(), OperatorError>>>),
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
    /// Starts nmo on a runtime of its own, with the client `make_client` builds inside that
    /// runtime (a kube client's connection pool lives on the runtime that builds it).
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
            run: Run::Thread {
                kill: Some(kill),
                thread: Some(thread),
            },
        }
    }

    /// Starts nmo as a task of the calling runtime, so that its spans reach the subscriber the
    /// test set for this thread.
    pub fn spawn_here(client: Client, options: OperatorOptions) -> Operator {
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(operator::run(client, options, async move {
            let _ = stopped.await;
        }));
        Operator {
            stop: Some(stop),
            run: Run::Task(Some(task)),
        }
    }

    /// Asks the operator to stop as SIGTERM would and waits for it.
    pub async fn stop(mut self) -> Result<(), OperatorError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.join().await
    }

    /// Waits for the operator to stop on its own (it is not asked to) and returns how it ended.
    pub async fn wait(mut self) -> Result<(), OperatorError> {
        self.join().await
    }

    /// Kills the operator mid-flight, as a crash would.
    pub async fn kill(mut self) {
        match &mut self.run {
            Run::Thread { kill, .. } => {
                if let Some(kill) = kill.take() {
                    let _ = kill.send(());
                }
                let _ = self.join().await;
            }
            Run::Task(task) => {
                if let Some(task) = task.take() {
                    task.abort();
                    let _ = task.await;
                }
            }
        }
    }

    async fn join(&mut self) -> Result<(), OperatorError> {
        match &mut self.run {
            Run::Thread { thread, .. } => {
                let thread = thread.take().expect("joined once");
                let joined = tokio::time::timeout(
                    STOP_TIMEOUT,
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
            Run::Task(task) => {
                let task = task.take().expect("joined once");
                match tokio::time::timeout(STOP_TIMEOUT, task).await {
                    Ok(Ok(outcome)) => outcome,
                    Ok(Err(join)) => panic!("the operator task failed: {join}"),
                    Err(elapsed) => panic!("the operator did not stop within 30 s: {elapsed}"),
                }
            }
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        // A test that fails midway must not leave an operator running into the next test.
        match &mut self.run {
            Run::Thread { kill, .. } => {
                if let Some(kill) = kill.take() {
                    let _ = kill.send(());
                }
            }
            Run::Task(task) => {
                if let Some(task) = task.take() {
                    task.abort();
                }
            }
        }
    }
}

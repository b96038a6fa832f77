//! nmo running in the demo's process: the whole operator (`operator::run`) on its own task,
//! talking HTTP to the simulator through the real kube client.

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::error::DemoError;
use nmo::operator::{self, OperatorError, OperatorOptions};

/// A running embedded operator.
pub struct EmbeddedOperator {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), OperatorError>>,
}

impl EmbeddedOperator {
    /// Starts nmo with `client`: no metrics, probe or webhook servers (the demo needs no ports
    /// and several demos may share a machine).
    pub fn start(client: kube::Client) -> EmbeddedOperator {
        let options = OperatorOptions {
            metrics_bind_address: "0".into(),
            health_probe_bind_address: "0".into(),
            webhook_port: 0,
            ..OperatorOptions::default()
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(operator::run(client, options, async move {
            let _ = stopped.await;
        }));
        EmbeddedOperator { stop, task }
    }

    /// Whether it stopped by itself (it only should when asked).
    pub fn has_stopped(&self) -> bool {
        self.task.is_finished()
    }

    /// Asks it to stop, as SIGTERM would, and waits.
    pub async fn stop(self) -> Result<(), DemoError> {
        let _ = self.stop.send(());
        match self.task.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(DemoError::Operator(error.to_string())),
            Err(join) => Err(DemoError::Operator(join.to_string())),
        }
    }
}

//! The body of a status write, `{"status": {...}}`, serialized straight from the typed status.
//!
//! A `serde_json::Value` tree of the status costs several times its JSON (a map per pending
//! pod) and lives as long as the write is in flight: at 500 maintenances writing at once, that
//! was 8 MiB at b2000's peak.

use serde::Serialize;

use crate::crd::{NodeMaintenanceStatus, QueueStatus};

/// A merge patch of the status subresource.
#[derive(Debug, Serialize)]
pub struct StatusPatch {
    status: StatusWithQueue,
}

#[derive(Debug, Serialize)]
struct StatusWithQueue {
    #[serde(flatten)]
    status: NodeMaintenanceStatus,
    /// Always written, `null` when absent: a merge patch leaves an absent field alone, and a
    /// maintenance that left the queue must have its place removed.
    queue: Option<QueueStatus>,
}

impl StatusPatch {
    /// The patch that makes the status `status`.
    pub fn of(mut status: NodeMaintenanceStatus) -> Self {
        let queue = status.queue.take();
        StatusPatch {
            status: StatusWithQueue { status, queue },
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::crd::MaintenancePhase;

    fn status(queue: Option<QueueStatus>) -> NodeMaintenanceStatus {
        NodeMaintenanceStatus {
            phase: Some(MaintenancePhase::Running),
            queue,
            ..NodeMaintenanceStatus::default()
        }
    }

    #[test]
    fn an_absent_queue_place_is_written_as_null_to_remove_it() {
        let body = serde_json::to_value(StatusPatch::of(status(None))).expect("serializes");
        assert_eq!(body, json!({"status": {"phase": "Running", "queue": null}}));
    }

    #[test]
    fn a_queue_place_is_written_once() {
        let queue = QueueStatus {
            position: 3,
            waiting_for: "maxParallelMaintenances".into(),
        };
        let text =
            serde_json::to_string(&StatusPatch::of(status(Some(queue)))).expect("serializes");
        assert_eq!(text.matches("\"queue\"").count(), 1, "{text}");
        let body: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(body["status"]["queue"]["position"], 3);
        assert_eq!(body["status"]["phase"], "Running");
    }
}

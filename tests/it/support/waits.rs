//! The waits end-to-end tests share, each through [`eventually`] and the admin client, and
//! the steps of a maintenance's life that tests take again and again (maintain a node, end the
//! maintenance), each one call.

use std::time::Duration;

use super::{TestEnv, eventually};

/// The phase a NodeMaintenance reports (`status.phase`).
pub use nmo::crd::MaintenancePhase as Phase;

/// How long a maintenance may take to reach a phase, or to be undone and gone.
const MAINTENANCE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a drain may take to report the budget that blocks it.
const BLOCKED_TIMEOUT: Duration = Duration::from_secs(20);
/// How long an event may take to be sent (they go out alongside the status).
const EVENT_TIMEOUT: Duration = Duration::from_secs(10);

impl TestEnv {
    /// Waits until the NodeMaintenance `name` reports `phase`.
    pub async fn wait_phase(&self, name: &str, phase: Phase) {
        let what = format!("{name} to be {phase:?}");
        eventually(&what, MAINTENANCE_TIMEOUT, async || {
            self.phase(name).await == Some(phase)
        })
        .await;
    }

    /// Waits until the NodeMaintenance `name` is Succeeded (its node cordoned and drained).
    pub async fn wait_succeeded(&self, name: &str) {
        self.wait_phase(name, Phase::Succeeded).await;
    }

    /// Waits until the NodeMaintenance `name` is Failed.
    pub async fn wait_failed(&self, name: &str) {
        self.wait_phase(name, Phase::Failed).await;
    }

    /// Puts `node` into maintenance: creates the NodeMaintenance `name` and waits until it
    /// is Succeeded.
    pub async fn maintain(&self, name: &str, node: &str) {
        self.create_maintenance(name, node).await;
        self.wait_succeeded(name).await;
    }

    /// Ends a maintenance: deletes the NodeMaintenance and waits until it is gone (undone).
    pub async fn end_maintenance(&self, name: &str) {
        self.delete_maintenance(name).await;
        self.wait_gone(name).await;
    }

    /// Waits until the NodeMaintenance `name` is gone (its finalizer removed after the undo).
    pub async fn wait_gone(&self, name: &str) {
        let what = format!("{name} to be gone");
        eventually(&what, MAINTENANCE_TIMEOUT, async || {
            self.maintenance(name).await.is_none()
        })
        .await;
    }

    /// Waits until the NodeMaintenance reports that the budget `pdb` blocks its drain.
    pub async fn wait_blocked_by(&self, name: &str, pdb: &str) {
        let what = format!("{name} to be blocked by {pdb}");
        self.wait_last_error_mentions(&what, BLOCKED_TIMEOUT, name, pdb)
            .await;
    }

    /// Waits (`what`, for `timeout` at most) until the NodeMaintenance's `lastError` mentions
    /// `text`.
    pub async fn wait_last_error_mentions(
        &self,
        what: &str,
        timeout: Duration,
        name: &str,
        text: &str,
    ) {
        eventually(what, timeout, async || {
            self.last_error_mentions(name, text).await
        })
        .await;
    }

    /// Waits (`what`, for 10 s at most) until an event with `reason` about the object named
    /// `name` has a message saying every one of `texts`.
    pub async fn wait_event(&self, what: &str, name: &str, reason: &str, texts: &[&str]) {
        eventually(what, EVENT_TIMEOUT, async || {
            self.event_messages(name, reason)
                .await
                .iter()
                .any(|m| texts.iter().all(|text| m.contains(text)))
        })
        .await;
    }

    /// Waits (`what`, for `timeout` at most) until the condition `type_` of the
    /// NodeMaintenance `name` has the reason `reason`.
    pub async fn wait_condition_reason(
        &self,
        what: &str,
        timeout: Duration,
        name: &str,
        type_: &str,
        reason: &str,
    ) {
        eventually(what, timeout, async || {
            self.condition(name, type_).await["reason"] == reason
        })
        .await;
    }

    /// Waits (for `timeout` at most) until the `DrainBlocked` condition of the NodeMaintenance
    /// `name` has the reason `reason`.
    pub async fn wait_drain_blocked(&self, name: &str, reason: &str, timeout: Duration) {
        let what = format!("the drain to say {reason}");
        self.wait_condition_reason(&what, timeout, name, "DrainBlocked", reason)
            .await;
    }

    /// Stops nmo as SIGTERM would and expects it to end cleanly (the last step of most tests).
    pub async fn stop_cleanly(&mut self) {
        self.stop_operator().await.expect("clean stop");
    }
}

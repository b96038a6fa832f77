//! The waits end-to-end tests share, each through [`eventually`] and the admin client.

use std::time::Duration;

use super::{TestEnv, eventually};

/// How long a maintenance may take to reach a phase, or to be undone and gone.
const MAINTENANCE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a drain may take to report the budget that blocks it.
const BLOCKED_TIMEOUT: Duration = Duration::from_secs(20);

impl TestEnv {
    /// Waits until the NodeMaintenance `name` reports `phase`.
    pub async fn wait_phase(&self, name: &str, phase: &str) {
        let what = format!("{name} to be {phase}");
        eventually(&what, MAINTENANCE_TIMEOUT, async || {
            self.phase(name).await.as_deref() == Some(phase)
        })
        .await;
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
        eventually(&what, BLOCKED_TIMEOUT, async || {
            self.last_error_mentions(name, pdb).await
        })
        .await;
    }
}

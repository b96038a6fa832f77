//! Waiting in tests for something a cluster does on its own time, the same way whether the
//! condition reads the simulator's store directly or asks any API server through a client: the
//! one `eventually` of the workspace's kube-facing tests (the actors' in-memory harness has its
//! own, for synchronous checks under paused time, as the actors crate knows nothing of kube).

use std::fmt::Display;
use std::time::Duration;

/// How often [`eventually`] checks again.
const POLL_INTERVAL: Duration = Duration::from_millis(25);

/// What one check of [`eventually`] found: `true`/`false`, `Err(why not yet)` when the failure
/// message should say what the last check saw, or `Some(value)`/`None` when the wait should
/// return what it found.
pub trait Outcome {
    /// What the wait returns once the condition holds.
    type Value;
    /// `Ok` once the condition holds, else what was seen instead (may be empty).
    fn into_result(self) -> Result<Self::Value, String>;
}

impl Outcome for bool {
    type Value = ();
    fn into_result(self) -> Result<(), String> {
        if self { Ok(()) } else { Err(String::new()) }
    }
}

impl<E: Display> Outcome for Result<(), E> {
    type Value = ();
    fn into_result(self) -> Result<(), String> {
        self.map_err(|seen| seen.to_string())
    }
}

impl<T> Outcome for Option<T> {
    type Value = T;
    fn into_result(self) -> Result<T, String> {
        self.ok_or_else(String::new)
    }
}

/// Checks `check` until it holds and returns what it found; panics after `timeout` naming
/// `what` (and what the last check saw, when it returns an `Err`). The check runs at once, then
/// every 25 ms.
///
/// ```ignore
/// eventually("node-0 to be cordoned", Duration::from_secs(5), async || {
///     env.node("node-0").await["spec"]["unschedulable"] == true
/// })
/// .await;
/// ```
pub async fn eventually<O: Outcome>(
    what: &str,
    timeout: Duration,
    mut check: impl AsyncFnMut() -> O,
) -> O::Value {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let seen = match check().await.into_result() {
            Ok(value) => return value,
            Err(seen) => seen,
        };
        if tokio::time::Instant::now() >= deadline {
            if seen.is_empty() {
                panic!("timed out after {timeout:?} waiting for {what}");
            }
            panic!("timed out after {timeout:?} waiting for {what}; last seen: {seen}");
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use std::panic::AssertUnwindSafe;

    use futures::FutureExt;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_condition_that_comes_true_ends_the_wait() {
        let mut checks = 0;
        eventually("the third check", Duration::from_secs(1), async || {
            checks += 1;
            checks == 3
        })
        .await;
        assert_eq!(checks, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_for_a_value_returns_it() {
        let mut checks = 0;
        let found = eventually("the third value", Duration::from_secs(1), async || {
            checks += 1;
            (checks == 3).then_some(checks * 10)
        })
        .await;
        assert_eq!(found, 30);
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_names_what_was_awaited_and_what_was_last_seen() {
        let mut checks = 0;
        let waited = AssertUnwindSafe(eventually(
            "the answer",
            Duration::from_secs(1),
            async || {
                checks += 1;
                Err::<(), _>(format!("{checks} wrong answers"))
            },
        ))
        .catch_unwind()
        .await;
        let panic = waited.expect_err("a condition that never holds times out");
        let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            message.starts_with("timed out after 1s waiting for the answer; last seen: "),
            "{message}"
        );
        // Checked at once, then every 25 ms until the deadline.
        assert!((40..=42).contains(&checks), "{checks} checks");
        assert!(
            message.ends_with(&format!("{checks} wrong answers")),
            "{message}"
        );
    }
}

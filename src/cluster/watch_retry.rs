//! How long a failed watch waits before it lists and watches again.
//!
//! kube-runtime's default backoff grows from 0.8 s to 30 s, doubled again by its jitter, and
//! only starts over once an event arrives. An API server restarted after some 20 s leaves each
//! watch in a sleep of 13-26 s when it comes back; its first answer to a resumed watch is then
//! `410 Gone` (its new watch cache does not reach back to the watch's resourceVersion), which is
//! one more failure: 26-51 s more before the re-list. That was nmo deaf for about 50 s after
//! every control-plane restart, while the Go operator's informers re-listed within seconds.
//!
//! Here a `410 Gone` means what it says: the server is up and the watch must list again, so it
//! does at once (spread over up to [`GONE_SPREAD`], so that every watch of the process told
//! so by the same restarted server does not list in the same instant). Any other failure
//! (connection refused or reset, a 5xx, a 403 from a server whose authorizer is still warming
//! up) backs off from [`RETRY_BASE`] up to [`RETRY_MAX`] with jitter, and never gives up: a
//! watch is back within [`RETRY_MAX`] of its server. A 429 waits at least its `Retry-After`.

use std::time::Duration;

use kube::runtime::watcher;
use nmo_actors::retry::Backoff;
use rand::Rng;

/// The first wait after a failure.
pub const RETRY_BASE: Duration = Duration::from_millis(250);
/// The longest wait between two attempts, however long the server is away.
pub const RETRY_MAX: Duration = Duration::from_secs(5);
/// A watch told `410 Gone` lists again within this.
pub const GONE_SPREAD: Duration = Duration::from_secs(1);

/// The failures of one watch since it last listed.
#[derive(Debug, Default)]
pub struct WatchRetry {
    backoff: Backoff,
}

impl WatchRetry {
    /// The watch failed with `error`: how long to wait before listing again.
    pub fn after(&mut self, error: &watcher::Error) -> Duration {
        if status(error).is_some_and(|status| status.code == 410) {
            // The server answered: whatever failed before is over.
            self.backoff.succeeded();
            let spread: f64 = rand::rng().random_range(0.0..=1.0);
            return GONE_SPREAD.mul_f64(spread);
        }
        let wait = self.backoff.failed(RETRY_BASE, RETRY_MAX);
        match retry_after(error) {
            Some(asked) => wait.max(asked),
            None => wait,
        }
    }

    /// Failures in a row since the watch last listed.
    pub fn failures(&self) -> u32 {
        self.backoff.failures()
    }

    /// The watch listed: the next failure starts from [`RETRY_BASE`] again.
    pub fn listed(&mut self) {
        self.backoff.succeeded();
    }
}

/// The API server's answer in `error`, if it answered.
fn status(error: &watcher::Error) -> Option<&kube::core::Status> {
    match error {
        watcher::Error::WatchError(status) => Some(status),
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => Some(status),
        _ => None,
    }
}

/// The `Retry-After` of a throttled request (429, API Priority and Fairness).
fn retry_after(error: &watcher::Error) -> Option<Duration> {
    let status = status(error).filter(|status| status.code == 429)?;
    let seconds = status.details.as_ref()?.retry_after_seconds;
    (seconds > 0).then(|| Duration::from_secs(u64::from(seconds)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::core::Status {
        kube::core::Status::failure("refused", "Reason").with_code(code)
    }

    fn gone() -> watcher::Error {
        watcher::Error::WatchError(Box::new(api(410)))
    }

    fn refused() -> watcher::Error {
        watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(api(503))))
    }

    #[test]
    fn failures_back_off_up_to_the_ceiling_and_never_give_up() {
        let mut retry = WatchRetry::default();
        let first = retry.after(&refused());
        assert!(first <= RETRY_BASE, "{first:?}");
        let waits: Vec<Duration> = (0..50).map(|_| retry.after(&refused())).collect();
        assert!(waits.iter().all(|wait| *wait <= RETRY_MAX), "{waits:?}");
        assert!(
            waits[40..].iter().all(|wait| *wait >= RETRY_MAX / 2),
            "{waits:?}"
        );
        assert_eq!(retry.failures(), 51);
        retry.listed();
        assert!(retry.after(&refused()) <= RETRY_BASE);
    }

    #[test]
    fn gone_lists_again_at_once_however_long_the_server_was_away() {
        let mut retry = WatchRetry::default();
        for _ in 0..20 {
            retry.after(&refused());
        }
        let wait = retry.after(&gone());
        assert!(wait <= GONE_SPREAD, "{wait:?}");
        assert_eq!(retry.failures(), 0, "the server answered");
        // 410 on a list too (a continue token that expired), and as an API error.
        let listed = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(api(410))));
        assert!(retry.after(&listed) <= GONE_SPREAD);
    }

    #[test]
    fn throttling_waits_at_least_what_the_server_asks() {
        // As API Priority and Fairness answers.
        let throttled: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure",
            "message": "Too many requests, please try again later.",
            "reason": "TooManyRequests",
            "details": {"retryAfterSeconds": 7},
            "code": 429
        }))
        .expect("a Status");
        let error = watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(throttled)));
        assert!(WatchRetry::default().after(&error) >= Duration::from_secs(7));
    }
}

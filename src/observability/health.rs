//! What the health probes say, and why.
//!
//! - `/readyz` ([`Readiness`]): can this replica act on what the cluster says? A standby is
//!   ready (it serves the webhook and waits for the election). The leader is ready once its
//!   NodeMaintenance watch has listed, and stays ready while every watch it runs (the
//!   NodeMaintenances, the shared Node, budget and lease watches, each maintenance's pod watch)
//!   is established; a watch that has been listing or failing for longer than
//!   [`WATCH_DOWN_BOUND`] makes it not ready until it is back (an API server restart, a lost
//!   connection, RBAC taken away). The bound keeps a watch that only re-lists from flapping the
//!   probe.
//! - `/healthz` ([`Liveness`]): is the actor system alive? While this replica leads, the
//!   supervisor is asked every [`HEARTBEAT_INTERVAL`] to answer a message; one that has not
//!   answered for [`SUPERVISOR_SILENCE_BOUND`], or has stopped, makes the process unhealthy
//!   (the kubelet restarts it). A replica without a supervisor (starting, standing by) is
//!   healthy.
//!
//! Both answer with a body saying why; [`report`] logs every change of either verdict and keeps
//! the `nmo_ready` and `nmo_watches` gauges.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use nmo_actors::SupervisorMsg;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use ractor::ActorRef;
use tokio::time::Instant;

use crate::cluster::watch_health::{WatchHealth, WatchState, WatchStatus};

/// A watch down (listing or failing) for longer than this makes the leader not ready.
pub const WATCH_DOWN_BOUND: Duration = Duration::from_secs(5);
/// How often the supervisor is asked to answer.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);
/// A supervisor that has not answered for this long is not alive.
pub const SUPERVISOR_SILENCE_BOUND: Duration = Duration::from_secs(30);
/// How often [`report`] looks at both verdicts.
const REPORT_INTERVAL: Duration = Duration::from_secs(1);
/// At most this many watches are named in a body or a log line.
const NAMED: usize = 5;

/// A probe's verdict and why, in words for its body and the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Ready (or alive).
    pub ok: bool,
    /// Why, starting with "ok" when it is.
    pub why: String,
}

impl Verdict {
    fn ok(why: impl std::fmt::Display) -> Self {
        Verdict {
            ok: true,
            why: format!("ok: {why}"),
        }
    }

    fn not(why: impl Into<String>) -> Self {
        Verdict {
            ok: false,
            why: why.into(),
        }
    }
}

#[derive(Debug, Default)]
enum Role {
    /// Not yet standing by or leading.
    #[default]
    Starting,
    /// Waiting for the leader election.
    StandingBy,
    /// Leading: the actors run with these watches.
    Leading {
        watches: WatchHealth,
        /// The NodeMaintenance watch has listed once.
        listed: bool,
    },
}

/// Whether this replica is ready (see the module docs). Clones share it.
#[derive(Debug, Clone, Default)]
pub struct Readiness {
    role: Arc<Mutex<Role>>,
}

impl Readiness {
    /// This replica waits for the leader election: ready.
    pub fn standing_by(&self) {
        *self.lock() = Role::StandingBy;
    }

    /// This replica leads with `watches`: ready once the NodeMaintenance watch has listed.
    pub fn leading(&self, watches: WatchHealth) {
        *self.lock() = Role::Leading {
            watches,
            listed: false,
        };
    }

    /// The NodeMaintenance watch has listed: every maintenance is known.
    pub fn listed(&self) {
        if let Role::Leading { listed, .. } = &mut *self.lock() {
            *listed = true;
        }
    }

    /// The verdict now.
    pub fn check(&self) -> Verdict {
        match &*self.lock() {
            Role::Starting => Verdict::not("not ready: starting"),
            Role::StandingBy => Verdict::ok("standing by for the leader election"),
            Role::Leading { watches, listed } => judge(*listed, &watches.snapshot()),
        }
    }

    /// Whether the replica is ready now.
    pub fn is_ready(&self) -> bool {
        self.check().ok
    }

    fn lock(&self) -> MutexGuard<'_, Role> {
        self.role.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The leader's verdict from its watches.
fn judge(listed: bool, watches: &[WatchStatus]) -> Verdict {
    let down: Vec<&WatchStatus> = watches
        .iter()
        .filter(|watch| watch.down_for > WATCH_DOWN_BOUND)
        .collect();
    if !down.is_empty() {
        return Verdict::not(format!(
            "not ready: {} of {} watches down for more than {WATCH_DOWN_BOUND:?}: {}",
            down.len(),
            watches.len(),
            describe(&down)
        ));
    }
    if !listed {
        return Verdict::not("not ready: the NodeMaintenance watch has not listed yet");
    }
    let established = watches
        .iter()
        .filter(|watch| watch.state == WatchState::Established)
        .count();
    Verdict::ok(format!(
        "leading, {established} of {} watches established",
        watches.len()
    ))
}

/// The first few watches of `down`, with their state and for how long.
fn describe(down: &[&WatchStatus]) -> String {
    let mut named: Vec<String> = down
        .iter()
        .take(NAMED)
        .map(|watch| match &watch.state {
            WatchState::Failing { error } => {
                format!(
                    "{} failing for {} s ({error})",
                    watch.name,
                    watch.down_for.as_secs()
                )
            }
            WatchState::Listing => {
                format!("{} listing for {} s", watch.name, watch.down_for.as_secs())
            }
            WatchState::Established => watch.name.clone(),
        })
        .collect();
    if down.len() > NAMED {
        named.push(format!("and {} more", down.len() - NAMED));
    }
    named.join("; ")
}

#[derive(Debug, Default)]
enum Supervision {
    /// No supervisor runs (starting, standing by, stopping).
    #[default]
    None,
    /// The supervisor runs and last answered then.
    Answered(Instant),
    /// The supervisor is gone.
    Stopped(String),
}

/// Whether the actor system is alive (see the module docs). Clones share it.
#[derive(Debug, Clone, Default)]
pub struct Liveness {
    supervision: Arc<Mutex<Supervision>>,
}

impl Liveness {
    /// Asks `supervisor` to answer every [`HEARTBEAT_INTERVAL`], until the returned future is
    /// dropped (then no supervisor is watched any more).
    pub async fn watch_supervisor(&self, supervisor: ActorRef<SupervisorMsg>) {
        let _unwatch = Unwatch(self.clone());
        *self.lock() = Supervision::Answered(Instant::now());
        loop {
            let answer = supervisor
                .call(SupervisorMsg::Remembered, Some(HEARTBEAT_INTERVAL))
                .await;
            match answer {
                Ok(ractor::rpc::CallResult::Success(_)) => {
                    *self.lock() = Supervision::Answered(Instant::now());
                }
                // No answer in time: the last answer ages until the bound says enough.
                Ok(_) => {}
                Err(error) => {
                    *self.lock() = Supervision::Stopped(error.to_string());
                    return;
                }
            }
            tokio::time::sleep(HEARTBEAT_INTERVAL).await;
        }
    }

    /// The verdict now.
    pub fn check(&self) -> Verdict {
        match &*self.lock() {
            Supervision::None => Verdict::ok("no supervisor runs on this replica"),
            Supervision::Answered(at) => {
                let silent = at.elapsed();
                if silent > SUPERVISOR_SILENCE_BOUND {
                    Verdict::not(format!(
                        "unhealthy: the supervisor has not answered for {} s",
                        silent.as_secs()
                    ))
                } else {
                    Verdict::ok(format!(
                        "the supervisor answered {} s ago",
                        silent.as_secs()
                    ))
                }
            }
            Supervision::Stopped(why) => {
                Verdict::not(format!("unhealthy: the supervisor stopped: {why}"))
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Supervision> {
        self.supervision
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Forgets the supervisor when its watch ends, unless it was found stopped.
struct Unwatch(Liveness);

impl Drop for Unwatch {
    fn drop(&mut self) {
        let mut supervision = self.0.lock();
        if matches!(*supervision, Supervision::Answered(_)) {
            *supervision = Supervision::None;
        }
    }
}

/// Labels of `nmo_watches`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WatchLabels {
    state: &'static str,
}

/// `nmo_ready` (1 while `/readyz` says ready) and `nmo_watches{state}` (the leader's watches
/// by state: listing, established, failing). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct HealthMetrics {
    ready: Gauge,
    watches: Family<WatchLabels, Gauge>,
}

impl HealthMetrics {
    /// Registers both in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "nmo_ready",
            "1 while /readyz says this replica is ready, 0 while it says why not",
            self.ready.clone(),
        );
        registry.register(
            "nmo_watches",
            "The leader's watches by state (listing, established, failing)",
            self.watches.clone(),
        );
    }

    fn set(&self, ready: bool, watches: &[WatchStatus]) {
        self.ready.set(i64::from(ready));
        for state in ["listing", "established", "failing"] {
            let count = watches
                .iter()
                .filter(|watch| state_name(&watch.state) == state)
                .count();
            self.watches
                .get_or_create(&WatchLabels { state })
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
    }
}

fn state_name(state: &WatchState) -> &'static str {
    match state {
        WatchState::Listing => "listing",
        WatchState::Established => "established",
        WatchState::Failing { .. } => "failing",
    }
}

/// Looks at both verdicts every second: logs each change (with why) and keeps `metrics`. Runs
/// until dropped; `watches` are the leader's, read for the gauge.
pub async fn report(
    readiness: Readiness,
    liveness: Liveness,
    watches: WatchHealth,
    metrics: HealthMetrics,
) {
    let (mut was_ready, mut was_alive) = (None, None);
    loop {
        let ready = readiness.check();
        let alive = liveness.check();
        metrics.set(ready.ok, &watches.snapshot());
        if was_ready != Some(ready.ok) {
            if ready.ok {
                tracing::info!(why = %ready.why, "ready");
            } else {
                tracing::warn!(why = %ready.why, "not ready");
            }
            was_ready = Some(ready.ok);
        }
        if was_alive != Some(alive.ok) {
            if !alive.ok {
                tracing::error!(why = %alive.why, "unhealthy");
            } else if was_alive.is_some() {
                tracing::info!(why = %alive.why, "healthy again");
            }
            was_alive = Some(alive.ok);
        }
        tokio::time::sleep(REPORT_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(name: &str, state: WatchState, down_for: u64) -> WatchStatus {
        WatchStatus {
            name: name.into(),
            state,
            down_for: Duration::from_secs(down_for),
        }
    }

    #[test]
    fn the_leader_is_ready_once_listed_while_no_watch_is_down_beyond_the_bound() {
        let up = [
            watch("NodeMaintenances", WatchState::Established, 0),
            watch("pods on node n1", WatchState::Listing, 1),
        ];
        assert!(!judge(false, &up).ok, "not listed yet");
        let ready = judge(true, &up);
        assert!(ready.ok);
        assert_eq!(ready.why, "ok: leading, 1 of 2 watches established");

        let failing = WatchState::Failing {
            error: "connection refused".into(),
        };
        let down = [
            watch("NodeMaintenances", failing.clone(), 12),
            watch("Nodes", WatchState::Listing, 6),
            watch("pods on node n1", failing, 2),
        ];
        let verdict = judge(true, &down);
        assert!(!verdict.ok);
        assert_eq!(
            verdict.why,
            "not ready: 2 of 3 watches down for more than 5s: NodeMaintenances failing for 12 s \
             (connection refused); Nodes listing for 6 s"
        );
    }

    #[test]
    fn a_standby_is_ready_and_a_replica_that_starts_is_not() {
        let readiness = Readiness::default();
        assert!(!readiness.is_ready());
        readiness.standing_by();
        assert!(readiness.is_ready());
        readiness.leading(WatchHealth::default());
        assert!(!readiness.is_ready(), "a new leader waits for its list");
        readiness.listed();
        assert!(readiness.is_ready());
    }

    /// The heartbeat against the real supervisor (over the in-memory cluster): healthy while
    /// it answers, unhealthy as soon as it has stopped.
    #[tokio::test]
    async fn the_supervisor_s_heartbeat_says_alive_then_stopped() {
        let cluster = nmo_actors::fake::FakeCluster::new();
        let config = nmo_actors::Config {
            actor_name_prefix: None,
            ..nmo_actors::Config::default()
        };
        let actors = nmo_actors::start(std::sync::Arc::new(cluster), config)
            .await
            .expect("the actors start");
        let liveness = Liveness::default();
        let heartbeat = tokio::spawn({
            let liveness = liveness.clone();
            let supervisor = actors.supervisor.clone();
            async move { liveness.watch_supervisor(supervisor).await }
        });
        let answered = async {
            while !liveness.check().why.contains("answered") {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), answered)
            .await
            .expect("the supervisor answered");
        assert!(liveness.check().ok);
        actors.shutdown().await;
        tokio::time::timeout(HEARTBEAT_INTERVAL * 3, heartbeat)
            .await
            .expect("the heartbeat ends with the supervisor")
            .expect("the heartbeat task");
        let verdict = liveness.check();
        assert!(!verdict.ok, "{verdict:?}");
        assert!(
            verdict.why.starts_with("unhealthy: the supervisor stopped"),
            "{verdict:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_supervisor_that_stops_answering_is_unhealthy_and_one_that_stopped_too() {
        let liveness = Liveness::default();
        assert!(liveness.check().ok, "no supervisor: healthy");
        *liveness.lock() = Supervision::Answered(Instant::now());
        tokio::time::advance(SUPERVISOR_SILENCE_BOUND).await;
        assert!(liveness.check().ok);
        tokio::time::advance(Duration::from_secs(1)).await;
        let verdict = liveness.check();
        assert!(!verdict.ok);
        assert_eq!(
            verdict.why,
            "unhealthy: the supervisor has not answered for 31 s"
        );
        *liveness.lock() = Supervision::Stopped("actor stopped".into());
        assert!(!liveness.check().ok);
    }
}

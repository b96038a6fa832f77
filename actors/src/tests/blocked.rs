//! Why a drain is blocked (each diagnosis class, end to end on the fake cluster) and the
//! drain deadline (`Hold`, `Undo`, none).

use std::collections::BTreeMap;

use super::pdbs::{condition, web_cluster, web_cluster_with, web_pdb};
use super::*;
use crate::model::{Event, OnDrainTimeout, OwnerRef, Uid};
use crate::pdb::PdbPod;
use crate::pdb::{IntOrPercent, Pdb};

/// A replacement of `web` that can run only on node `only` and is not scheduled.
fn stuck_replacement(only: &str) -> PdbPod {
    PdbPod {
        namespace: "app".into(),
        name: "web-new".into(),
        controller: Some(OwnerRef {
            kind: "ReplicaSet".into(),
            name: "n1-web-0-rs".into(),
            uid: Uid::default(),
        }),
        phase: PodPhase::Pending,
        ready: false,
        terminating: false,
        node_name: None,
        unschedulable: Some("0/2 nodes are available: 2 node(s) were unschedulable.".into()),
        node_selector: BTreeMap::from([("kubernetes.io/hostname".into(), only.into())]),
        tolerations: Vec::new(),
    }
}

fn hostname_node(name: &str) -> NodeState {
    let mut node = NodeState::test(name);
    node.labels
        .insert("kubernetes.io/hostname".into(), name.into());
    node
}

#[tokio::test(start_paused = true)]
async fn a_replacement_fitting_only_a_node_another_maintenance_cordons_is_a_deadlock() {
    let cluster = web_cluster(&["n1"], 1);
    cluster.set_node(hostname_node("n1"));
    cluster.set_node(hostname_node("n2"));
    cluster.add_unplaced_pod(stuck_replacement("n2"));
    cluster.put_watched_pdb(web_pdb(0));
    let h = Scenario::on(&cluster)
        .nm1()
        .maintenance("nm2", "n2")
        .start()
        .await;
    let deadlocked = || {
        condition(&cluster, "nm1", conditions::DRAIN_BLOCKED)
            .is_some_and(|c| c.status == "True" && c.reason == "CrossNodeDeadlock")
    };
    assert!(eventually(Duration::from_secs(10), deadlocked).await);
    let status = cluster.status("nm1");
    let error = status.last_error.clone().unwrap_or_default();
    assert!(
        error.contains("nm2 (node n2)") && error.contains("app/web-new"),
        "{error}"
    );
    assert_eq!(
        status.pending_pods_reasons[0].diagnosis.as_deref(),
        Some("CrossNodeDeadlock")
    );
    let blocked_events: Vec<Event> = cluster
        .events()
        .into_iter()
        .filter(|e| e.reason == reasons_drain_blocked())
        .collect();
    assert!(
        blocked_events
            .iter()
            .any(|e| e.type_ == EventType::Warning && e.message.contains("CrossNodeDeadlock")),
        "{blocked_events:?}"
    );
    let before = blocked_events.len();
    tokio::time::sleep(Duration::from_secs(120)).await;
    let after = cluster
        .events()
        .iter()
        .filter(|e| e.reason == reasons_drain_blocked())
        .count();
    assert_eq!(after, before, "no event per retry");
    // The reads are bounded: a handful per minute while nothing changes.
    let reads = h.eviction_stats().await.diagnosis_reads;
    assert!(reads <= 30, "{reads} reads in two minutes");
    h.stop().await;
}

fn reasons_drain_blocked() -> &'static str {
    crate::model::reasons::DRAIN_BLOCKED
}

#[tokio::test(start_paused = true)]
async fn a_replacement_that_fits_no_maintained_node_is_unschedulable() {
    let cluster = web_cluster(&["n1"], 1);
    cluster.set_node(hostname_node("n1"));
    cluster.add_unplaced_pod(stuck_replacement("gone"));
    cluster.put_watched_pdb(web_pdb(0));
    let h = Scenario::on(&cluster).nm1().start().await;
    assert!(
        eventually(Duration::from_secs(10), || condition(
            &cluster,
            "nm1",
            conditions::DRAIN_BLOCKED
        )
        .is_some_and(|c| c.reason == "ReplacementUnschedulable"
            && c.message.contains("0/2 nodes are available")))
        .await,
        "{:?}",
        cluster.status("nm1")
    );
    h.stop().await;
}

/// PDB `db` with `maxUnavailable: 0` over `app=web`: it never allows a disruption.
fn structural_pdb() -> Pdb {
    Pdb {
        name: "db".into(),
        max_unavailable: Some(IntOrPercent::Int(0)),
        ..web_pdb(0)
    }
}

/// Node `n1` with one pod, `app/n1-web-0`, under [`structural_pdb`].
fn structural_cluster() -> FakeCluster {
    web_cluster_with(&["n1"], 1, structural_pdb())
}

/// `nm1` on `n1` with a `drainTimeout` of `secs` and `on_timeout`.
fn nm1_with_deadline(secs: u64, on_timeout: OnDrainTimeout) -> Maintenance {
    Maintenance::test("nm1")
        .on("n1")
        .with_drain_timeout(Duration::from_secs(secs), on_timeout)
}

#[tokio::test(start_paused = true)]
async fn a_pdb_that_never_allows_is_named_structural_at_once() {
    let cluster = structural_cluster();
    let h = Scenario::on(&cluster).nm1().start().await;
    assert!(
        eventually(Duration::from_secs(2), || condition(
            &cluster,
            "nm1",
            conditions::DRAIN_BLOCKED
        )
        .is_some_and(|c| c.reason == "StructuralBudget"))
        .await
    );
    let error = cluster.status("nm1").last_error.unwrap_or_default();
    assert!(error.contains("maxUnavailable is 0"), "{error}");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_passed_deadline_holds_the_node_cordoned_and_deletes_no_pod() {
    let cluster = structural_cluster();
    let h = Scenario::on(&cluster)
        .create(nm1_with_deadline(60, OnDrainTimeout::Hold))
        .start()
        .await;
    assert!(
        eventually(Duration::from_secs(5), || cluster
            .status("nm1")
            .drain_time_remaining
            .is_some())
        .await
    );
    let status = cluster.status("nm1");
    assert_eq!(status.drain_time_remaining.as_deref(), Some("1m"));
    assert_eq!(
        status.drain_deadline,
        status
            .drain_start_time
            .map(|t| t + chrono::Duration::seconds(60))
    );
    assert!(h.wait_failed("nm1", Duration::from_secs(70)).await);
    let status = cluster.status("nm1");
    let drained = condition(&cluster, "nm1", conditions::DRAINED).unwrap();
    assert_eq!(drained.reason, conditions::DRAIN_TIMEOUT);
    let error = status.last_error.unwrap_or_default();
    assert!(
        error.contains("drainTimeout 1m") && error.contains("Hold") && error.contains("db"),
        "{error}"
    );
    assert!(
        cluster
            .event_reasons()
            .contains(&"FailedMaintenance".to_string())
    );
    assert_in_maintenance(&cluster, "n1");
    assert_eq!(cluster.pods("n1").len(), 1, "no pod deleted");
    assert_eq!(cluster.count_calls("delete_pod"), 0);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_in_maintenance(&cluster, "n1");
    h.stop().await;
}

/// `nm1` on `n1`, whose drain a structural PDB blocks, Failed once its `drainTimeout` of
/// `secs` passed with `policy`.
async fn failed_past_its_deadline(secs: u64, policy: OnDrainTimeout) -> (FakeCluster, Harness) {
    let cluster = structural_cluster();
    let h = Scenario::on(&cluster)
        .create(nm1_with_deadline(secs, policy))
        .start()
        .await;
    assert!(h.wait_failed("nm1", Duration::from_secs(secs + 10)).await);
    (cluster, h)
}

/// nmo's lease of `n1` is valid now.
fn assert_lease_held(cluster: &FakeCluster, h: &Harness) {
    let lease = cluster.lease(NS, "node-n1").expect("nmo's lease");
    assert_eq!(lease.holder_identity.as_deref(), Some(LEASE_HOLDER));
    let renewed = lease.renew_time.expect("a renew time");
    let duration = chrono::Duration::seconds(lease.lease_duration_seconds.unwrap_or(0).into());
    assert!(
        renewed + duration > h.now(),
        "the lease lapsed: renewed at {renewed}, now {}",
        h.now()
    );
}

/// A held drain keeps nmo's node lease renewed: the node stays out for a person, and no other
/// operator may take it over while the NodeMaintenance exists.
#[tokio::test(start_paused = true)]
async fn a_held_drain_keeps_the_node_lease_renewed() {
    let (cluster, h) = failed_past_its_deadline(60, OnDrainTimeout::Hold).await;
    // Three lease durations later.
    tokio::time::sleep(Duration::from_secs(3 * 3600)).await;
    assert_lease_held(&cluster, &h);
    assert_in_maintenance(&cluster, "n1");
    h.stop().await;
}

/// A held drain is held across a restart of nmo (or a leader handover): the new actor finds
/// the Failed status with its timed-out drain and renews the node lease from then on, so it
/// does not lapse an hour later while the node waits cordoned for a person.
#[tokio::test(start_paused = true)]
async fn a_held_drain_keeps_its_lease_renewed_after_a_restart() {
    let (cluster, h) = failed_past_its_deadline(60, OnDrainTimeout::Hold).await;
    h.stop().await;
    let h = Harness::on(&cluster).await;
    tokio::time::sleep(Duration::from_secs(3 * 3600)).await;
    assert_lease_held(&cluster, &h);
    assert_eq!(phase(&cluster, "nm1"), Some(Phase::Failed));
    assert_in_maintenance(&cluster, "n1");
    h.stop().await;
}

/// The node of a drain undone at its deadline (`Undo`) is not held after a restart: nmo's
/// lease stays released.
#[tokio::test(start_paused = true)]
async fn an_undone_drain_takes_no_lease_after_a_restart() {
    let (cluster, h) = failed_past_its_deadline(30, OnDrainTimeout::Undo).await;
    assert!(wait_no_lease(&cluster, "n1", Duration::from_secs(10)).await);
    h.stop().await;
    let h = Harness::on(&cluster).await;
    tokio::time::sleep(Duration::from_secs(3 * 3600)).await;
    assert!(cluster.lease(NS, "node-n1").is_none(), "no lease taken");
    assert_released(&cluster, "n1");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_passed_deadline_with_undo_gives_the_node_back() {
    let (cluster, h) = failed_past_its_deadline(30, OnDrainTimeout::Undo).await;
    assert!(
        eventually(Duration::from_secs(10), || !decisions::node_in_maintenance(
            &cluster.node("n1").unwrap()
        ))
        .await
    );
    assert_released(&cluster, "n1");
    assert_eq!(cluster.pods("n1").len(), 1, "no pod deleted");
    assert!(cluster.lease(NS, "node-n1").is_none(), "lease released");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn without_a_timeout_nothing_changes() {
    let cluster = structural_cluster();
    let h = Scenario::on(&cluster).nm1().start().await;
    tokio::time::sleep(Duration::from_secs(3600)).await;
    let status = cluster.status("nm1");
    assert_eq!(status.phase, Some(Phase::Running));
    assert_eq!(status.drain_deadline, None);
    assert_eq!(status.drain_time_remaining, None);
    assert!(status.drain_start_time.is_some());
    h.stop().await;
}

/// The supervisor keeps a driven maintenance without its pod lists; a held drain whose actor
/// crashed and restarted still says which pods it waits for.
#[tokio::test(start_paused = true)]
async fn a_held_drain_restarted_after_a_crash_keeps_its_pending_pods() {
    let (cluster, h) = failed_past_its_deadline(60, OnDrainTimeout::Hold).await;
    let before = cluster.status("nm1");
    assert!(!before.pending_pods_reasons.is_empty(), "{before:?}");
    // The actor crashes at its next lease renewal and is started again.
    cluster.panic_next("update_lease", 1);
    tokio::time::sleep(Duration::from_secs(2 * 3600)).await;
    assert!(
        cluster.count_calls("update_lease") >= 2,
        "the lease was renewed after the crash"
    );
    let after = cluster.status("nm1");
    assert_eq!(after.phase, Some(Phase::Failed));
    assert_eq!(after.pending_pods, before.pending_pods);
    assert_eq!(after.pending_pods_refs, before.pending_pods_refs);
    assert_eq!(after.pending_pods_reasons, before.pending_pods_reasons);
    assert_in_maintenance(&cluster, "n1");
    h.stop().await;
}

/// A wall clock that can be stepped, as NTP steps a machine's clock: tokio's time plus an
/// offset the test sets.
#[derive(Clone)]
struct SteppedClock {
    base: crate::config::TokioClock,
    offset: Arc<std::sync::Mutex<chrono::Duration>>,
}

impl crate::config::Clock for SteppedClock {
    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        let offset = *self.offset.lock().unwrap_or_else(|e| e.into_inner());
        self.base.now() + offset
    }
}

/// The drain deadline is timed on the monotonic clock: a step of the wall clock an hour
/// forward, ten seconds into a drain of ten minutes, neither fails it early, nor keeps it
/// from failing when its ten minutes are up.
#[tokio::test(start_paused = true)]
async fn a_step_of_the_wall_clock_does_not_move_the_drain_deadline() {
    let cluster = structural_cluster();
    let offset = Arc::new(std::sync::Mutex::new(chrono::Duration::zero()));
    let clock = SteppedClock {
        base: crate::config::TokioClock::starting_at(t0()),
        offset: offset.clone(),
    };
    let h = Scenario::on(&cluster)
        .config(|c| c.clock = Arc::new(clock))
        .create(nm1_with_deadline(600, OnDrainTimeout::Hold))
        .start()
        .await;
    assert!(
        eventually(Duration::from_secs(10), || cluster
            .status("nm1")
            .drain_deadline
            .is_some())
        .await
    );
    *offset.lock().unwrap() = chrono::Duration::hours(1);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        phase(&cluster, "nm1"),
        Some(Phase::Running),
        "failed early: {:?}",
        cluster.status("nm1").last_error
    );
    assert!(
        h.wait_failed("nm1", Duration::from_secs(600)).await,
        "failed once its ten minutes were up"
    );
    h.stop().await;
}

/// A node that is not Ready has no kubelet to finish its terminating pods: the drain says so
/// (`NodeNotReady`, the node's Ready condition and the pods), with an event, instead of
/// waiting on "Terminating"; nothing is force-deleted.
#[tokio::test(start_paused = true)]
async fn terminating_pods_on_a_node_that_is_not_ready_are_a_blocker_of_their_own() {
    let cluster = FakeCluster::with_node("n1", 2);
    cluster.set_evicted_pods_linger(true);
    let h = Scenario::on(&cluster).nm1().start().await;
    assert!(
        h.wait_calls("evict_pod", |n| n == 2, Duration::from_secs(5))
            .await
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        condition(&cluster, "nm1", conditions::DRAIN_BLOCKED).is_none(),
        "terminating on a Ready node is progress"
    );
    let since = t0() + chrono::Duration::minutes(3);
    cluster.set_node_readiness(
        "n1",
        crate::model::NodeReady {
            status: Some(crate::model::ConditionStatus::Unknown),
            since: Some(since),
            reason: Some("NodeStatusUnknown".into()),
        },
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let blocked = condition(&cluster, "nm1", conditions::DRAIN_BLOCKED).expect("DrainBlocked");
    assert_eq!(blocked.reason, "NodeNotReady");
    assert!(
        blocked
            .message
            .contains("Ready=Unknown, NodeStatusUnknown, since"),
        "{blocked:?}"
    );
    let status = cluster.status("nm1");
    assert!(
        status
            .pending_pods_reasons
            .iter()
            .all(|r| r.diagnosis.as_deref() == Some("NodeNotReady")),
        "{status:?}"
    );
    assert!(
        status
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("n1-p0") && e.contains("n1-p1")),
        "{status:?}"
    );
    let events = cluster.events();
    assert!(
        events.iter().any(|e| e.reason == "DrainBlocked"
            && e.type_ == EventType::Warning
            && e.message.contains("NodeNotReady")),
        "{events:?}"
    );
    assert_eq!(
        cluster.count_calls("delete_pod"),
        0,
        "nothing force-deleted"
    );
    // The kubelet is back and finishes the pods.
    cluster.set_node_ready("n1", true);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(condition(&cluster, "nm1", conditions::DRAIN_BLOCKED).is_none());
    h.stop().await;
}

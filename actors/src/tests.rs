//! Actor tests against the in-memory fake cluster, with paused tokio time (hours of lease
//! renewal run in milliseconds).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use tokio::task::JoinHandle;

use crate::config::{Config, TokioClock};
use crate::fake::{FakeCluster, MaintenanceChange};
use crate::messages::SupervisorMsg;
use crate::model::{
    DRAIN_TAINT_KEY, EXCLUDE_LABEL, EventTarget, EventType, FINALIZER, LEASE_HOLDER, Lease,
    Maintenance, MaintenanceStatus, OwnerRef, Phase, PodInfo, PodPhase, PodRef, Taint,
    UNSCHEDULABLE_TAINT_KEY, conditions,
};
use crate::plan;
use crate::ports::{ClusterError, EvictionOutcome};
use crate::system::{ActorSystem, start};

const NS: &str = "medik8s-leases";

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).single().unwrap()
}

fn test_config() -> Config {
    Config {
        actor_name_prefix: None,
        clock: Arc::new(TokioClock::starting_at(t0())),
        ..Config::default()
    }
}

struct Harness {
    system: Option<ActorSystem>,
    feeder: JoinHandle<()>,
    clock: TokioClock,
}

impl Harness {
    async fn new(cluster: FakeCluster) -> Self {
        Self::with_config(cluster, |_| {}).await
    }

    async fn with_config(cluster: FakeCluster, tweak: impl FnOnce(&mut Config)) -> Self {
        let clock = TokioClock::starting_at(t0());
        let mut config = test_config();
        config.clock = Arc::new(clock);
        tweak(&mut config);
        let system = start(Arc::new(cluster.clone()), config).await.unwrap();
        // Plays the controller: every NodeMaintenance change goes to the supervisor.
        let mut changes = cluster.subscribe_maintenances();
        let supervisor = system.supervisor.clone();
        let feeder = tokio::spawn(async move {
            while let Some(change) = changes.recv().await {
                let msg = match change {
                    MaintenanceChange::Upsert(nm) => SupervisorMsg::Upsert(nm),
                    MaintenanceChange::Deleted(name) => SupervisorMsg::Deleted { name },
                };
                if supervisor.cast(msg).is_err() {
                    return;
                }
            }
        });
        Harness {
            system: Some(system),
            feeder,
            clock,
        }
    }

    fn now(&self) -> DateTime<Utc> {
        crate::config::Clock::now(&self.clock)
    }

    async fn active(&self) -> Vec<String> {
        let system = self.system.as_ref().unwrap();
        ractor::call!(system.supervisor, SupervisorMsg::Active).unwrap()
    }

    async fn stop(mut self) {
        self.feeder.abort();
        if let Some(system) = self.system.take() {
            system.shutdown().await;
        }
    }
}

/// Waits (in virtual time) until `cond` holds; false after `max`.
async fn eventually(max: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + max;
    loop {
        if cond() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn phase(cluster: &FakeCluster, nm: &str) -> Option<Phase> {
    cluster.status(nm).phase
}

fn foreign_taint() -> Taint {
    Taint {
        key: "example.com/gpu".into(),
        value: Some("broken".into()),
        effect: "NoExecute".into(),
        time_added: None,
    }
}

fn cluster_with_node(node: &str, pods: usize) -> FakeCluster {
    let cluster = FakeCluster::new();
    cluster.add_node(node);
    for i in 0..pods {
        cluster.add_pod(node, "app", &format!("{node}-p{i}"));
    }
    cluster
}

fn assert_in_maintenance(cluster: &FakeCluster, node: &str) {
    let n = cluster.node(node).unwrap();
    assert!(
        plan::node_in_maintenance(&n),
        "node not in maintenance: {n:?}"
    );
}

fn assert_released(cluster: &FakeCluster, node: &str) {
    let n = cluster.node(node).unwrap();
    assert!(!n.unschedulable, "still cordoned");
    assert!(!n.labels.contains_key(EXCLUDE_LABEL), "still labelled");
    assert!(
        !n.taints
            .iter()
            .any(|t| t.key == DRAIN_TAINT_KEY || t.key == UNSCHEDULABLE_TAINT_KEY),
        "still tainted: {:?}",
        n.taints
    );
}

fn pod(name: &str, kind: Option<&str>) -> PodInfo {
    PodInfo {
        namespace: "app".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        phase: PodPhase::Running,
        controller: kind.map(|k| OwnerRef {
            kind: k.into(),
            name: format!("{name}-owner"),
        }),
        is_mirror: false,
        has_empty_dir: false,
        terminating: false,
        grace_period_seconds: Some(30),
    }
}

#[tokio::test(start_paused = true)]
async fn drains_node_and_succeeds() {
    let cluster = cluster_with_node("n1", 2);
    let mut cache = pod("cache", None);
    cache.has_empty_dir = true;
    cluster.add_pod_info("n1", cache);
    cluster.add_pod_info("n1", pod("agent", Some("DaemonSet")));
    cluster.add_daemonset("app", "agent-owner");
    cluster.add_pod_info("n1", pod("orphan", Some("DaemonSet")));
    let mut mirror = pod("kube-proxy", None);
    mirror.is_mirror = true;
    cluster.add_pod_info("n1", mirror);
    let mut job = pod("job", Some("Job"));
    job.phase = PodPhase::Succeeded;
    cluster.add_pod_info("n1", job);
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());

    assert!(
        eventually(Duration::from_secs(30), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    let status = cluster.status("nm1");
    assert_eq!(status.drain_progress, 100);
    assert_eq!(status.total_pods, 7);
    assert_eq!(
        status.eviction_pods, 5,
        "2 + emptyDir + orphan DS + finished"
    );
    assert!(status.pending_pods.is_empty() && status.pending_pods_refs.is_empty());
    assert_eq!(status.last_error, None);
    assert!(status.last_update.is_some());
    let drained = plan::condition(&status, conditions::DRAINED).unwrap();
    assert_eq!(drained.status, "True");
    assert!(cluster.maintenance("nm1").unwrap().has_finalizer());
    assert_in_maintenance(&cluster, "n1");

    let left: Vec<String> = cluster.pods("n1").into_iter().map(|p| p.name).collect();
    assert_eq!(left, vec!["agent".to_string(), "kube-proxy".to_string()]);
    assert_eq!(cluster.count_calls("evict_pod app/cache"), 1);
    assert_eq!(cluster.count_calls("evict_pod app/n1-p0"), 1);
    assert_eq!(cluster.count_calls("delete_pod app/job"), 1);
    assert_eq!(cluster.count_calls("delete_pod app/orphan"), 1);
    assert_eq!(cluster.count_calls("evict_pod app/agent"), 0);
    assert_eq!(cluster.count_calls("evict_pod app/kube-proxy"), 0);

    let lease = cluster.lease(NS, "node-n1").unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some(LEASE_HOLDER));
    assert_eq!(lease.lease_duration_seconds, Some(3600));
    assert_eq!(cluster.lease_owner(NS, "node-n1").unwrap().uid, "uid-n1");
    let reasons = cluster.event_reasons();
    assert_eq!(reasons, vec!["BeginMaintenance", "SucceedMaintenance"]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn status_written_only_when_it_changes() {
    let cluster = cluster_with_node("n1", 1);
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(30), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    let writes = cluster.count_calls("write_status");
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(cluster.count_calls("write_status"), writes);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn undo_on_delete() {
    let cluster = cluster_with_node("n1", 2);
    let mut node = cluster.node("n1").unwrap();
    node.taints.push(foreign_taint());
    cluster.set_node(node);
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(30), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    cluster.delete_maintenance("nm1");
    assert!(
        eventually(Duration::from_secs(10), || cluster
            .maintenance("nm1")
            .is_none())
        .await
    );
    assert_released(&cluster, "n1");
    assert_eq!(cluster.node("n1").unwrap().taints, vec![foreign_taint()]);
    assert!(cluster.lease(NS, "node-n1").is_none(), "lease deleted");
    let events = cluster.events();
    let uncordon = events.iter().find(|e| e.reason == "UncordonNode").unwrap();
    assert!(matches!(&uncordon.target, EventTarget::Node { name, .. } if name == "n1"));
    assert_eq!(events.last().unwrap().reason, "RemovedMaintenance");
    assert!(eventually(Duration::from_secs(5), || true).await);
    assert!(h.active().await.is_empty());
    // Never re-cordoned afterwards.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_released(&cluster, "n1");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn lease_renewed_over_simulated_hours() {
    let cluster = cluster_with_node("n1", 1);
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(30), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_secs(1800)).await;
        let lease = cluster.lease(NS, "node-n1").unwrap();
        assert!(
            plan::lease_valid(&lease, h.now()),
            "lease lapsed at {}: {lease:?}",
            h.now()
        );
    }
    // 5 hours at one renewal per 20 minutes.
    assert!(cluster.count_calls("update_lease") >= 14);
    let lease = cluster.lease(NS, "node-n1").unwrap();
    assert_eq!(lease.lease_transitions, Some(0));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn pdb_blocked_pods_are_retried_as_one_unit() {
    let cluster = cluster_with_node("n1", 10);
    let names: Vec<String> = (0..10).map(|i| format!("n1-p{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    cluster.add_pdb("app", "web", &refs, 0);
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());
    tokio::time::sleep(Duration::from_secs(300)).await;

    let calls = cluster.count_calls("evict_pod");
    // First round: every pod once (nothing known yet); then one probe per backoff step
    // (1, 2, 4, ... capped at 60 s: about 9 in 5 minutes), not 10 per step.
    assert!(calls >= 10, "{calls}");
    assert!(calls <= 25, "PDB hammered: {calls} evictions");
    let status = cluster.status("nm1");
    assert_eq!(status.phase, Some(Phase::Running));
    assert_eq!(status.pending_pods.len(), 10);
    assert_eq!(status.drain_progress, 0);
    let error = status.last_error.clone().unwrap();
    assert!(error.contains("web"), "{error}");
    assert!(error.contains("needs"), "API message kept: {error}");
    assert!(
        status
            .pending_pods_reasons
            .iter()
            .any(|r| r.pdb.as_deref() == Some("web") && r.reason == conditions::BLOCKED_BY_PDB)
    );
    let drained = plan::condition(&status, conditions::DRAINED).unwrap();
    assert_eq!(drained.reason, conditions::BLOCKED_BY_PDB);

    cluster.set_pdb_allowed("app", "web", 10);
    assert!(
        eventually(Duration::from_secs(120), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    assert_eq!(cluster.status("nm1").last_error, None);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_budget_allowing_one_disruption_releases_its_pods_one_at_a_time() {
    let cluster = cluster_with_node("n1", 6);
    let names: Vec<String> = (0..6).map(|i| format!("n1-p{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    cluster.add_pdb("app", "one", &refs, 0);
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());
    // A replacement becomes Ready every 2 s: the budget allows one more disruption.
    let budget = cluster.clone();
    let replenish = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(2)).await;
            budget.set_pdb_allowed("app", "one", 1);
        }
    });
    assert!(
        eventually(Duration::from_secs(120), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    replenish.abort();
    let calls = cluster.count_calls("evict_pod");
    // 6 accepted, 6 refused in the first round, then about two refused probes per 2 s round.
    // Releasing every parked pod after each success would add 5 + 4 + 3 + 2 + 1 refusals.
    assert!(calls <= 28, "{calls} evictions for 6 pods");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn blocked_maintenance_does_not_delay_another() {
    let cluster = cluster_with_node("n1", 3);
    cluster.add_pdb("app", "tight", &["n1-p0", "n1-p1", "n1-p2"], 0);
    cluster.add_node("n2");
    for i in 0..3 {
        cluster.add_pod("n2", "other", &format!("n2-p{i}"));
    }
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());
    tokio::time::sleep(Duration::from_secs(20)).await;
    let start = tokio::time::Instant::now();
    cluster.create_maintenance("nm2", "n2", t0());
    assert!(
        eventually(Duration::from_secs(10), || phase(&cluster, "nm2")
            == Some(Phase::Succeeded))
        .await
    );
    assert!(
        start.elapsed() < Duration::from_secs(6),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(phase(&cluster, "nm1"), Some(Phase::Running));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn delete_while_blocked_undoes_within_five_seconds() {
    let cluster = cluster_with_node("n1", 2);
    cluster.add_pdb("app", "tight", &["n1-p0", "n1-p1"], 0);
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(30), || cluster
            .status("nm1")
            .last_error
            .is_some_and(|e| e.contains("tight")))
        .await
    );
    assert_in_maintenance(&cluster, "n1");
    let start = tokio::time::Instant::now();
    cluster.delete_maintenance("nm1");
    assert!(
        eventually(Duration::from_secs(5), || cluster
            .maintenance("nm1")
            .is_none())
        .await
    );
    assert!(start.elapsed() <= Duration::from_secs(5));
    assert_released(&cluster, "n1");
    // No more evictions once deleted.
    let calls = cluster.count_calls("evict_pod");
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert_eq!(cluster.count_calls("evict_pod"), calls);
    assert_released(&cluster, "n1");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn drift_is_repaired() {
    let cluster = cluster_with_node("n1", 1);
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(30), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    // Someone uncordons, untaints and unlabels, and adds a taint of their own.
    let mut node = cluster.node("n1").unwrap();
    node.unschedulable = false;
    node.taints = vec![foreign_taint()];
    node.labels.clear();
    cluster.set_node(node);
    let start = tokio::time::Instant::now();
    assert!(
        eventually(Duration::from_secs(5), || plan::node_in_maintenance(
            &cluster.node("n1").unwrap()
        ))
        .await
    );
    assert!(start.elapsed() <= Duration::from_secs(5));
    let node = cluster.node("n1").unwrap();
    assert!(node.taints.contains(&foreign_taint()), "foreign taint kept");
    assert_eq!(node.taints.len(), 3);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn concurrent_taint_change_is_retried_from_a_fresh_read() {
    let cluster = cluster_with_node("n1", 1);
    cluster.fail_next(
        "patch_node",
        vec![ClusterError::Conflict("test op failed".into())],
    );
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(30), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    assert_in_maintenance(&cluster, "n1");
    assert!(cluster.count_calls("patch_node") >= 2);
    h.stop().await;
}

fn foreign_lease(renewed: DateTime<Utc>, seconds: i32, transitions: i32) -> Lease {
    Lease {
        namespace: NS.into(),
        name: "node-n1".into(),
        holder_identity: Some("node-healthcheck".into()),
        lease_duration_seconds: Some(seconds),
        acquire_time: Some(renewed),
        renew_time: Some(renewed),
        lease_transitions: Some(transitions),
        resource_version: String::new(),
    }
}

#[tokio::test(start_paused = true)]
async fn foreign_valid_lease_waits_then_proceeds() {
    let cluster = cluster_with_node("n1", 2);
    cluster.put_lease(foreign_lease(t0(), 60, 1));
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(10), || cluster
            .status("nm1")
            .last_error
            .is_some_and(|e| e.contains("node-healthcheck")))
        .await
    );
    let status = cluster.status("nm1");
    assert_eq!(status.phase, Some(Phase::Running));
    assert_eq!(status.error_on_lease_count, 0);
    let cond = plan::condition(&status, conditions::LEASE_ACQUIRED).unwrap();
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("False", conditions::LEASE_HELD_BY_OTHER)
    );
    let node = cluster.node("n1").unwrap();
    assert!(!node.unschedulable && node.taints.is_empty() && node.labels.is_empty());
    assert_eq!(cluster.count_calls("evict_pod"), 0);
    // Re-checked at least every 5 s while waiting.
    let reads = cluster.count_calls("get_lease");
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(cluster.count_calls("get_lease") >= reads + 4);

    assert!(
        eventually(Duration::from_secs(60), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    let lease = cluster.lease(NS, "node-n1").unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some(LEASE_HOLDER));
    assert_eq!(lease.lease_transitions, Some(2));
    let status = cluster.status("nm1");
    assert_eq!(status.last_error, None);
    assert_eq!(
        plan::condition(&status, conditions::LEASE_ACQUIRED)
            .unwrap()
            .status,
        "True"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn expired_foreign_lease_is_taken_over() {
    let cluster = cluster_with_node("n1", 1);
    cluster.put_lease(foreign_lease(t0() - chrono::Duration::hours(2), 3600, 4));
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(30), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    let lease = cluster.lease(NS, "node-n1").unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some(LEASE_HOLDER));
    assert_eq!(lease.lease_transitions, Some(5));
    assert_eq!(lease.lease_duration_seconds, Some(3600));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn lease_errors_above_three_fail_and_undo() {
    let cluster = cluster_with_node("n1", 1);
    let h = Harness::with_config(cluster.clone(), |c| {
        c.lease_renew_interval = Duration::from_secs(10);
    })
    .await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(30), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    cluster.fail_next(
        "update_lease",
        (0..10)
            .map(|_| ClusterError::Transient("etcd timeout".into()))
            .collect(),
    );
    assert!(
        eventually(Duration::from_secs(120), || phase(&cluster, "nm1")
            == Some(Phase::Failed))
        .await
    );
    let status = cluster.status("nm1");
    assert_eq!(status.error_on_lease_count, 4);
    assert!(status.last_error.unwrap().contains("lease"));
    assert!(
        eventually(Duration::from_secs(10), || !cluster
            .node("n1")
            .unwrap()
            .unschedulable)
        .await
    );
    assert_released(&cluster, "n1");
    let failed = cluster
        .events()
        .into_iter()
        .find(|e| e.reason == "FailedMaintenance")
        .unwrap();
    assert_eq!(failed.type_, EventType::Warning);
    // Failed stays Failed: nothing re-cordons.
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_released(&cluster, "n1");
    // Deleting it still releases the finalizer.
    cluster.delete_maintenance("nm1");
    assert!(
        eventually(Duration::from_secs(10), || cluster
            .maintenance("nm1")
            .is_none())
        .await
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_maintenance_fresh_from_the_watch_is_not_read_again() {
    let cluster = cluster_with_node("n1", 1);
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(60), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    assert_eq!(
        cluster.count_calls("get_maintenance"),
        0,
        "{:?}",
        cluster.calls()
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_maintenance_seen_at_start_stays_failed_without_a_re_read() {
    let cluster = cluster_with_node("n1", 1);
    let mut nm = cluster.create_maintenance("nm1", "n1", t0());
    nm.finalizers = vec![FINALIZER.to_string()];
    nm.status = Some(MaintenanceStatus {
        phase: Some(Phase::Failed),
        last_error: Some("failed to extend lease owned by us: timeout".into()),
        ..MaintenanceStatus::default()
    });
    cluster.put_maintenance(nm);
    let h = Harness::new(cluster.clone()).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_released(&cluster, "n1");
    assert_eq!(phase(&cluster, "nm1"), Some(Phase::Failed));
    assert_eq!(
        cluster.count_calls("patch_node"),
        0,
        "{:?}",
        cluster.calls()
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_first_maintenance_creates_its_lease_without_reading_it_first() {
    let cluster = cluster_with_node("n1", 1);
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(60), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    assert_eq!(cluster.count_calls("get_lease"), 0, "{:?}", cluster.calls());
    // The first create may find the lease namespace missing (then it is created): two at most.
    assert!(cluster.count_calls("create_lease") <= 2);
    let lease = cluster.lease(NS, "node-n1").unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some(LEASE_HOLDER));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_first_maintenance_finding_a_lease_reads_it_and_respects_its_holder() {
    let cluster = cluster_with_node("n1", 1);
    cluster.put_lease(foreign_lease(t0(), 3600, 1));
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(30), || cluster
            .status("nm1")
            .last_error
            .is_some_and(|e| e.contains("node-healthcheck")))
        .await
    );
    assert!(
        cluster.count_calls("get_lease") >= 1,
        "the refused create led to a read"
    );
    let lease = cluster.lease(NS, "node-n1").unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some("node-healthcheck"));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn lease_errors_before_evictions_do_not_count() {
    let cluster = cluster_with_node("n1", 1);
    cluster.fail_next(
        "get_lease",
        (0..6)
            .map(|_| ClusterError::Transient("timeout".into()))
            .collect(),
    );
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(60), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    assert_eq!(cluster.status("nm1").error_on_lease_count, 0);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn missing_node_fails_without_retry() {
    let cluster = FakeCluster::new();
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "ghost", t0());
    assert!(
        eventually(Duration::from_secs(10), || phase(&cluster, "nm1")
            == Some(Phase::Failed))
        .await
    );
    let status = cluster.status("nm1");
    assert!(status.last_error.unwrap().contains("ghost"));
    let event = cluster
        .events()
        .into_iter()
        .find(|e| e.reason == "FailedMaintenance")
        .unwrap();
    assert_eq!(event.type_, EventType::Warning);
    let reads = cluster.count_calls("get_node");
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(cluster.count_calls("get_node"), reads, "no retry");
    assert_eq!(cluster.count_calls("create_lease"), 0);
    assert_eq!(
        cluster
            .event_reasons()
            .iter()
            .filter(|r| *r == "FailedMaintenance")
            .count(),
        1
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn second_maintenance_for_a_node_is_failed_and_never_touches_it() {
    let cluster = cluster_with_node("n1", 1);
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("first", "n1", t0());
    assert!(
        eventually(Duration::from_secs(30), || phase(&cluster, "first")
            == Some(Phase::Succeeded))
        .await
    );
    cluster.create_maintenance("second", "n1", t0() + chrono::Duration::seconds(30));
    assert!(
        eventually(Duration::from_secs(10), || phase(&cluster, "second")
            == Some(Phase::Failed))
        .await
    );
    let status = cluster.status("second");
    assert!(status.last_error.unwrap().contains("first"));
    assert!(plan::condition(&cluster.status("second"), conditions::DUPLICATE).is_some());
    assert_eq!(h.active().await, vec!["first".to_string()]);
    // Deleting the duplicate only removes its finalizer.
    cluster.delete_maintenance("second");
    assert!(
        eventually(Duration::from_secs(10), || cluster
            .maintenance("second")
            .is_none())
        .await
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_in_maintenance(&cluster, "n1");
    assert!(cluster.lease(NS, "node-n1").is_some());
    assert_eq!(phase(&cluster, "first"), Some(Phase::Succeeded));
    assert_eq!(cluster.count_calls("emit_event UncordonNode"), 0);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn older_maintenance_wins_when_both_exist() {
    let cluster = cluster_with_node("n1", 1);
    // Both exist before nmo starts (webhook off); the younger one happens to be listed first.
    cluster.create_maintenance("b-young", "n1", t0() + chrono::Duration::seconds(5));
    cluster.create_maintenance("a-old", "n1", t0());
    let h = Harness::new(cluster.clone()).await;
    assert!(
        eventually(Duration::from_secs(30), || phase(&cluster, "a-old")
            == Some(Phase::Succeeded)
            && phase(&cluster, "b-young") == Some(Phase::Failed))
        .await
    );
    assert!(
        cluster
            .status("b-young")
            .last_error
            .unwrap()
            .contains("a-old")
    );
    assert_eq!(h.active().await, vec!["a-old".to_string()]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn restart_mid_drain_converges() {
    // The state a crashed nmo left: finalizer, Running status, node cordoned, our lease, two of
    // three pods still there.
    let cluster = cluster_with_node("n1", 0);
    cluster.add_pod("n1", "app", "p1");
    cluster.add_pod("n1", "app", "p2");
    let node = cluster.node("n1").unwrap();
    cluster.set_node(
        plan::maintenance_patch(&node, t0())
            .map(|p| crate::model::NodeState {
                taints: p.desired_taints,
                unschedulable: true,
                labels: [(EXCLUDE_LABEL.to_string(), "true".to_string())].into(),
                ..node.clone()
            })
            .unwrap(),
    );
    let mut lease = foreign_lease(t0() - chrono::Duration::minutes(10), 3600, 0);
    lease.holder_identity = Some(LEASE_HOLDER.into());
    cluster.put_lease(lease);
    let refs = vec![
        PodRef {
            namespace: "app".into(),
            name: "p1".into(),
        },
        PodRef {
            namespace: "app".into(),
            name: "p2".into(),
        },
    ];
    cluster.put_maintenance(Maintenance {
        name: "nm1".into(),
        uid: "uid-nm1".into(),
        resource_version: "1".into(),
        node_name: "n1".into(),
        reason: "r".into(),
        creation_timestamp: t0(),
        deleting: false,
        finalizers: vec![FINALIZER.into()],
        status: Some(MaintenanceStatus {
            phase: Some(Phase::Running),
            drain_progress: 33,
            pending_pods: vec!["p1".into(), "p2".into()],
            pending_pods_refs: refs,
            total_pods: 3,
            eviction_pods: 3,
            ..MaintenanceStatus::default()
        }),
    });
    let h = Harness::new(cluster.clone()).await;
    assert!(
        eventually(Duration::from_secs(30), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    let status = cluster.status("nm1");
    assert_eq!((status.total_pods, status.eviction_pods), (3, 3));
    assert_eq!(status.drain_progress, 100);
    assert!(cluster.pods("n1").is_empty());
    assert_eq!(cluster.count_calls("add_finalizer"), 0);
    assert!(
        !cluster
            .event_reasons()
            .contains(&"BeginMaintenance".to_string())
    );
    let lease = cluster.lease(NS, "node-n1").unwrap();
    assert_eq!(
        lease.lease_transitions,
        Some(0),
        "our lease renewed, not taken over"
    );
    assert_eq!(lease.renew_time, Some(t0()));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn restart_during_deletion_finishes_undo() {
    let cluster = cluster_with_node("n1", 0);
    let node = cluster.node("n1").unwrap();
    cluster.set_node(crate::model::NodeState {
        unschedulable: true,
        taints: plan::with_maintenance_taints(&[], t0()),
        labels: [(EXCLUDE_LABEL.to_string(), "true".to_string())].into(),
        ..node
    });
    let mut lease = foreign_lease(t0(), 3600, 0);
    lease.holder_identity = Some(LEASE_HOLDER.into());
    cluster.put_lease(lease);
    let mut nm = cluster.create_maintenance("nm1", "n1", t0());
    nm.finalizers = vec![FINALIZER.into()];
    nm.deleting = true;
    cluster.put_maintenance(nm);
    let h = Harness::new(cluster.clone()).await;
    assert!(
        eventually(Duration::from_secs(10), || cluster
            .maintenance("nm1")
            .is_none())
        .await
    );
    assert_released(&cluster, "n1");
    assert!(cluster.lease(NS, "node-n1").is_none());
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn foreign_lease_left_alone_on_undo() {
    let cluster = cluster_with_node("n1", 0);
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(30), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    // Someone else takes the lease over (e.g. after it was deleted by hand).
    let ours = cluster.lease(NS, "node-n1").unwrap();
    cluster.put_lease(Lease {
        holder_identity: Some("node-healthcheck".into()),
        ..ours
    });
    cluster.delete_maintenance("nm1");
    assert!(
        eventually(Duration::from_secs(10), || cluster
            .maintenance("nm1")
            .is_none())
        .await
    );
    let lease = cluster.lease(NS, "node-n1").unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some("node-healthcheck"));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn crashed_node_actor_is_restarted_and_converges() {
    let cluster = cluster_with_node("n1", 2);
    cluster.add_pdb("app", "tight", &["n1-p0", "n1-p1"], 0);
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(10), || cluster.count_calls("evict_pod")
            >= 2)
        .await
    );
    let system = h.system.as_ref().unwrap();
    let children = system.supervisor.get_children();
    assert_eq!(children.len(), 1);
    let old = children[0].get_id();
    children[0].kill();
    assert!(
        eventually(Duration::from_secs(10), || {
            let now = system.supervisor.get_children();
            now.len() == 1 && now[0].get_id() != old
        })
        .await
    );
    assert_eq!(h.active().await, vec!["nm1".to_string()]);
    cluster.set_pdb_allowed("app", "tight", 2);
    assert!(
        eventually(Duration::from_secs(120), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn throttled_eviction_is_retried() {
    let cluster = cluster_with_node("n1", 1);
    cluster.script_evictions(
        "app",
        "n1-p0",
        (0..3)
            .map(|_| EvictionOutcome::Throttled {
                retry_after: Some(Duration::from_secs(2)),
            })
            .collect(),
    );
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(60), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    assert_eq!(cluster.count_calls("evict_pod app/n1-p0"), 4);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn too_many_pdbs_is_reported() {
    let cluster = cluster_with_node("n1", 1);
    cluster.add_pdb("app", "a", &["n1-p0"], 5);
    cluster.add_pdb("app", "b", &["n1-p0"], 5);
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(30), || cluster
            .status("nm1")
            .last_error
            .is_some_and(|e| e.contains("more than one PodDisruptionBudget")))
        .await
    );
    let status = cluster.status("nm1");
    assert_eq!(
        status.pending_pods_reasons[0].reason,
        "TooManyPodDisruptionBudgets"
    );
    assert_eq!(status.phase, Some(Phase::Running));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn full_eviction_queue_refuses_and_asker_retries() {
    let cluster = cluster_with_node("n1", 6);
    let h = Harness::with_config(cluster.clone(), |c| {
        c.eviction_queue_bound = 2;
        c.eviction_max_in_flight = 1;
        c.eviction_rate_per_sec = 1.0;
        c.eviction_burst = 1;
    })
    .await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(120), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    let system = h.system.as_ref().unwrap();
    let stats = ractor::call!(system.evictor, crate::messages::EvictionMsg::Stats).unwrap();
    assert!(stats.refused > 0, "{stats:?}");
    assert_eq!(stats.held, 0);
    assert_eq!(cluster.count_calls("evict_pod"), 6);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn rate_limit_spreads_evictions() {
    let cluster = cluster_with_node("n1", 20);
    let h = Harness::with_config(cluster.clone(), |c| {
        c.eviction_rate_per_sec = 2.0;
        c.eviction_burst = 2;
    })
    .await;
    cluster.create_maintenance("nm1", "n1", t0());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let calls = cluster.count_calls("evict_pod");
    assert!(
        (2..=10).contains(&calls),
        "{calls} evictions in ~3 s at 2/s"
    );
    assert!(
        eventually(Duration::from_secs(60), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn missing_node_retried_when_the_spec_changes() {
    let cluster = FakeCluster::new();
    let h = Harness::new(cluster.clone()).await;
    cluster.create_maintenance("nm1", "late", t0());
    assert!(
        eventually(Duration::from_secs(10), || phase(&cluster, "nm1")
            == Some(Phase::Failed))
        .await
    );
    cluster.add_node("late");
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        phase(&cluster, "nm1"),
        Some(Phase::Failed),
        "no retry on its own"
    );
    let mut nm = cluster.maintenance("nm1").unwrap();
    nm.reason = "node is back".into();
    cluster.put_maintenance(nm);
    assert!(
        eventually(Duration::from_secs(30), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    assert_in_maintenance(&cluster, "late");
    assert_eq!(cluster.status("nm1").last_error, None);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn lease_taken_by_another_holder_counts_and_fails() {
    let cluster = cluster_with_node("n1", 1);
    let h = Harness::with_config(cluster.clone(), |c| {
        c.lease_renew_interval = Duration::from_secs(10);
    })
    .await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(30), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    // Another operator grabs a valid lease (it should not, but nmo must cope).
    cluster.put_lease(foreign_lease(h.now(), 3600, 9));
    assert!(
        eventually(Duration::from_secs(20), || cluster
            .status("nm1")
            .error_on_lease_count
            >= 1)
        .await
    );
    assert!(
        eventually(Duration::from_secs(60), || phase(&cluster, "nm1")
            == Some(Phase::Failed))
        .await
    );
    assert!(
        eventually(Duration::from_secs(10), || !cluster
            .node("n1")
            .unwrap()
            .unschedulable)
        .await
    );
    assert_released(&cluster, "n1");
    // Their lease is not ours to delete.
    assert_eq!(
        cluster
            .lease(NS, "node-n1")
            .unwrap()
            .holder_identity
            .as_deref(),
        Some("node-healthcheck")
    );
    h.stop().await;
}

/// Records what the actors report to their observer.
#[derive(Default)]
struct Recorder {
    seen: std::sync::Mutex<Vec<String>>,
}

impl Recorder {
    fn push(&self, what: String) {
        self.seen.lock().unwrap().push(what);
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    fn count(&self, what: &str) -> usize {
        self.seen().iter().filter(|s| *s == what).count()
    }
}

impl crate::observe::Observer for Recorder {
    fn eviction(&self, result: crate::observe::EvictionResult) {
        self.push(format!("eviction {}", result.as_str()));
    }

    fn maintenance_phase(&self, from: Option<Phase>, to: Option<Phase>) {
        let name = |p: Option<Phase>| p.map_or("-", Phase::as_str);
        self.push(format!("phase {} -> {}", name(from), name(to)));
    }

    fn drain_finished(&self, _took: Duration) {
        self.push("drained".to_string());
    }

    fn lease_operation(&self, op: crate::observe::LeaseOp, result: crate::observe::LeaseResult) {
        self.push(format!("lease {} {}", op.as_str(), result.as_str()));
    }
}

#[tokio::test(start_paused = true)]
async fn the_observer_hears_evictions_phases_drain_and_lease_operations() {
    let cluster = cluster_with_node("n1", 3);
    cluster.add_pdb("app", "web", &["n1-p2"], 0);
    let recorder = Arc::new(Recorder::default());
    let observer = recorder.clone();
    let h = Harness::with_config(cluster.clone(), move |c| {
        c.observer = observer;
        c.lease_renew_interval = Duration::from_secs(600);
    })
    .await;
    cluster.create_maintenance("nm1", "n1", t0());
    assert!(
        eventually(Duration::from_secs(30), || recorder
            .count("eviction blocked_by_pdb")
            >= 2)
        .await
    );
    assert_eq!(recorder.count("drained"), 0);
    cluster.set_pdb_allowed("app", "web", 1);
    assert!(
        eventually(Duration::from_secs(120), || phase(&cluster, "nm1")
            == Some(Phase::Succeeded))
        .await
    );
    assert_eq!(recorder.count("eviction evicted"), 3);
    assert_eq!(
        recorder.count("eviction blocked_by_pdb"),
        cluster.count_calls("evict_pod app/n1-p2") - 1
    );
    assert_eq!(recorder.count("drained"), 1);
    tokio::time::sleep(Duration::from_secs(1800)).await;
    assert_eq!(recorder.count("lease acquire ok"), 1);
    assert!(
        recorder.count("lease renew ok") >= 2,
        "{:?}",
        recorder.seen()
    );

    cluster.delete_maintenance("nm1");
    assert!(
        eventually(Duration::from_secs(10), || cluster
            .maintenance("nm1")
            .is_none())
        .await
    );
    assert_eq!(recorder.count("lease release ok"), 1);
    let phases: Vec<String> = recorder
        .seen()
        .into_iter()
        .filter(|s| s.starts_with("phase"))
        .collect();
    assert_eq!(
        phases,
        [
            "phase - -> Running",
            "phase Running -> Succeeded",
            "phase Succeeded -> -"
        ]
    );
    h.stop().await;
}

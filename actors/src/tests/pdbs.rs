//! PDB-driven eviction, against the fake cluster: the shared PDB watch gates evictions
//! on each PDB's observed status. (Why a drain is blocked, and its deadline: `blocked`.)

use super::*;
use crate::pdb::{Pdb, PdbStatus};

/// PDB `web` over `app=web` in namespace `app`, `maxUnavailable: 1`, whose fresh status
/// allows `allowed` disruptions (as the disruption controller computes it: 4 expected pods, 3
/// wanted healthy, so `3 + allowed` are healthy).
pub(super) fn web_pdb(allowed: i32) -> Pdb {
    Pdb::test(
        "web",
        PdbStatus {
            observed_generation: 1,
            disruptions_allowed: allowed,
            current_healthy: 3 + allowed,
            desired_healthy: 3,
            expected_pods: 4,
            ..PdbStatus::default()
        },
    )
}

/// [`web_pdb`] with a spec newer than its status (generation 2): the disruption controller has
/// not seen it yet.
fn stale_web_pdb(allowed: i32) -> Pdb {
    Pdb {
        generation: 2,
        ..web_pdb(allowed)
    }
}

/// Nodes `nodes`, each with `per_node` pods `app/<node>-web-<i>` labelled `app=web`.
pub(super) fn web_cluster(nodes: &[&str], per_node: usize) -> FakeCluster {
    let cluster = FakeCluster::new();
    for node in nodes {
        cluster.add_node(node);
        for i in 0..per_node {
            let pod = PodInfo::test("app", &format!("{node}-web-{i}")).labelled("app", "web");
            cluster.add_pod_info(node, pod);
        }
    }
    cluster
}

/// [`web_cluster`] with `pdb` in place (and watched).
pub(super) fn web_cluster_with(nodes: &[&str], per_node: usize, pdb: Pdb) -> FakeCluster {
    let cluster = web_cluster(nodes, per_node);
    cluster.put_watched_pdb(pdb);
    cluster
}

pub(super) fn condition(
    cluster: &FakeCluster,
    nm: &str,
    type_: &str,
) -> Option<crate::model::Condition> {
    decisions::condition(&cluster.status(nm), type_).cloned()
}

#[tokio::test(start_paused = true)]
async fn two_nodes_share_one_pdbs_allowance_without_a_refusal() {
    let cluster = web_cluster_with(&["n1", "n2"], 2, web_pdb(1));
    let h = Scenario::on(&cluster)
        .nm1()
        .maintenance("nm2", "n2")
        .start()
        .await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        cluster.count_calls("evict_pod"),
        1,
        "the budget allows one disruption: one eviction for both nodes"
    );
    for evicted in 2..=4 {
        // The disruption controller saw a replacement become ready: one more disruption.
        cluster.set_watched_pdb_allowed("app", "web", 1);
        assert!(
            h.wait_calls("evict_pod", |n| n == evicted, Duration::from_millis(500))
                .await,
            "one more eviction at once, got {}",
            cluster.count_calls("evict_pod")
        );
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(cluster.count_calls("evict_pod"), evicted, "and only one");
    }
    assert!(h.wait_succeeded("nm1", Duration::from_secs(30)).await);
    assert!(h.wait_succeeded("nm2", Duration::from_secs(30)).await);
    let stats = h.eviction_stats().await;
    assert_eq!(stats.blocked, 0, "no eviction was refused: {stats:?}");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_pdb_allowing_none_gets_no_call_and_its_pods_go_when_its_status_changes() {
    let cluster = web_cluster_with(&["n1"], 3, web_pdb(0));
    let h = Scenario::on(&cluster).nm1().start().await;
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(
        cluster.count_calls("evict_pod"),
        0,
        "no call while it allows none"
    );
    let status = cluster.status("nm1");
    assert_eq!(status.phase, Some(Phase::Running));
    assert!(
        status
            .pending_pods_reasons
            .iter()
            .all(|r| r.reason == "BlockedByPodDisruptionBudget" && r.pdb.as_deref() == Some("web")),
        "{status:?}"
    );
    cluster.set_watched_pdb_allowed("app", "web", 2);
    assert!(
        h.wait_calls("evict_pod", |n| n == 2, Duration::from_millis(100))
            .await,
        "released the moment the status changed"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        cluster.count_calls("evict_pod"),
        2,
        "exactly as many as it allows"
    );
    cluster.set_watched_pdb_allowed("app", "web", 1);
    assert!(h.wait_succeeded("nm1", Duration::from_secs(5)).await);
    assert_eq!(h.eviction_stats().await.blocked, 0);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_stale_status_falls_back_to_the_429_backoff() {
    let cluster = web_cluster_with(&["n1"], 2, stale_web_pdb(2));
    let h = Scenario::on(&cluster).nm1().start().await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    let refused = h.eviction_stats().await.blocked;
    assert!(
        refused > 0,
        "the stale status was not trusted: calls were made"
    );
    assert!(refused < 12, "and refusals backed off: {refused} in 20 s");
    assert_eq!(phase(&cluster, "nm1"), Some(Phase::Running));
    cluster.set_watched_pdb_allowed("app", "web", 2);
    assert!(h.wait_succeeded("nm1", Duration::from_secs(5)).await);
    h.stop().await;
}

/// The status catches up while a probe sent on its stale predecessor is out (a real API
/// server's disruption controller writes it a moment after the spec changed): the probe's 429
/// must not park the pod behind a backoff the new status has already lifted.
#[tokio::test(start_paused = true)]
async fn a_status_that_catches_up_while_a_probe_is_out_lets_the_pod_go_at_once() {
    let cluster = web_cluster_with(&["n1"], 1, stale_web_pdb(1));
    // The probe is answered a second late, refused as the API refuses a stale PDB (with
    // its `Retry-After: 10`).
    cluster.delay_next("evict_pod", 1, Duration::from_secs(1));
    cluster.script_evictions(
        "app",
        "n1-web-0",
        vec![EvictionOutcome::BlockedByPdb {
            pdb: Some("web".into()),
            message: "The disruption budget web is still being processed by the server.".into(),
            retry_after: Some(Duration::from_secs(10)),
        }],
    );
    let h = Scenario::on(&cluster).nm1().start().await;
    assert!(
        h.wait_calls("evict_pod", |n| n == 1, Duration::from_secs(5))
            .await,
        "the probe goes"
    );
    // Meanwhile the controller catches up: the new spec allows one disruption.
    cluster.set_watched_pdb_allowed("app", "web", 1);
    assert!(
        h.wait_succeeded("nm1", Duration::from_secs(3)).await,
        "the pod goes once the refusal is back, not after the refusal's backoff: {:?}",
        cluster.calls()
    );
    assert_eq!(cluster.count_calls("evict_pod"), 2);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn pods_no_pdb_selects_go_at_once() {
    let cluster = web_cluster(&["n1"], 1);
    cluster.add_pod("n1", "app", "lonely");
    cluster.put_watched_pdb(web_pdb(0));
    let h = Scenario::on(&cluster).nm1().start().await;
    assert!(
        h.wait_calls("evict_pod app/lonely", |n| n == 1, Duration::from_secs(5))
            .await
    );
    assert_eq!(cluster.count_calls("evict_pod app/n1-web-0"), 0);
    h.stop().await;
}

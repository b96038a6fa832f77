//! Acting on exactly the pod the drain decided on: a request the eviction actor holds names the
//! pod's uid, is dropped the moment its pod leaves the node, and never reaches a pod that took
//! the name afterwards (on another node above all).

use super::pdbs::web_pdb;
use super::*;

/// `app/web-0` (uid `uid-app-web-0`) on `n1`, and `app/web-1` on `n1` too (so the drain is
/// still running when web-0 goes), both under budget `web` that allows no disruption.
fn held_behind_a_closed_budget() -> FakeCluster {
    let cluster = FakeCluster::new();
    cluster.add_node("n1");
    cluster.add_node("n2");
    for name in ["web-0", "web-1"] {
        cluster.add_pod_info("n1", PodInfo::test("app", name).labelled("app", "web"));
    }
    cluster.put_watched_pdb(web_pdb(0));
    cluster
}

/// The defect: a budget-held request was keyed by namespace/name only. A person deletes the
/// stuck `web-0`, its StatefulSet re-creates `web-0` on `n2`; when the budget later allows a
/// disruption, the held request must not evict the new pod on the other node.
#[tokio::test(start_paused = true)]
async fn a_held_request_never_evicts_a_pod_recreated_with_its_name_on_another_node() {
    let cluster = held_behind_a_closed_budget();
    let h = Scenario::on(&cluster).nm1().start().await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(cluster.count_calls("evict_pod"), 0, "held by the budget");

    assert!(cluster.remove_pod("app", "web-0"), "a person deletes web-0");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut again = PodInfo::test("app", "web-0").labelled("app", "web");
    again.uid = "uid-web-0-recreated".into();
    cluster.add_pod_info("n2", again);
    tokio::time::sleep(Duration::from_secs(1)).await;

    // The disruption controller counts the new pod: one disruption allowed.
    cluster.set_watched_pdb_allowed("app", "web", 1);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        cluster.count_calls("evict_pod app/web-0"),
        0,
        "the request for the old web-0 went with it: {:?}",
        cluster.calls()
    );
    assert!(
        cluster.pods("n2").iter().any(|p| &*p.name == "web-0"),
        "the new web-0 on n2 is still there"
    );
    assert_eq!(
        cluster.count_calls("evict_pod app/web-1"),
        1,
        "the pod still on the node got the allowance"
    );
    h.stop().await;
}

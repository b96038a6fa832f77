//! How nmo's watches get their first lists: in the WATCH itself (a streaming list) where the API
//! server serves them, by LIST then WATCH where it refuses them (on the simulator a refusal is
//! injected as a fault), and, on a real API server that refuses them, from its watch cache.

use nmo_sim::{FaultRule, Query};

use crate::support::{Backend, OPERATOR_AGENT, TestEnv};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_refusing_streaming_lists_is_listed_then_watched_by_every_watch() {
    let mut env = TestEnv::builder().nodes(2, 3).start().await;
    let sim = env.sim();
    // The first streaming list nmo asks for (its node watch) is refused as an API server
    // without the WatchList feature refuses it.
    sim.faults().add(
        FaultRule::on(Some("watch"), Some("nodes"))
            .user_agent(OPERATOR_AGENT)
            .errors(1.0, 422)
            .times(1),
    );
    env.maintain("nm-0", "node-0").await;
    let ours = |query: Query| sim.requests(&query.user_agent(OPERATOR_AGENT));
    assert!(
        ours(Query::all().verb("list").resource("nodes")) >= 1,
        "the refused node watch lists"
    );
    // From then on every watch lists first, though no fault touches them: a retried streaming
    // list would never LIST.
    sim.accounting().reset();
    env.maintain("nm-1", "node-1").await;
    assert_eq!(
        ours(Query::all().verb("list").resource("nodes")),
        0,
        "the node watch is shared: the second maintenance opens none"
    );
    assert_eq!(ours(Query::all().verb("list").resource("pods")), 1);
    env.stop_cleanly().await;
}

/// On a real API server whose etcd cannot serve streaming lists (etcd before 3.4.31 or 3.5.13,
/// such as the 3.4.23 of the test assets), every watch lists first, and the LIST of each
/// maintenance's pod watch asks for any resourceVersion (`0`): the API server answers it from
/// its watch cache. A LIST of the latest version would read etcd, where a node's pod LIST reads
/// every pod of the cluster; with a pod watch per maintenance that cost grows with nodes x pods.
/// (The node watch, one per process, keeps its paged LIST of the latest version.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_before_watches_are_answered_from_the_watch_cache_real() {
    let mut env = TestEnv::on(Backend::Real).nodes(2, 3).start().await;
    env.maintain("nm-0", "node-0").await;
    let pod_lists = env.operator_request_uris("list", "pods");
    if pod_lists.is_empty() {
        // An etcd that serves streaming lists: the watches list in the WATCH itself.
        let pod_watches = env.operator_request_uris("watch", "pods");
        assert!(
            pod_watches
                .iter()
                .any(|uri| uri.contains("sendInitialEvents=true")),
            "neither a LIST nor a streaming list for the pod watch: {pod_watches:?}"
        );
    } else {
        let from_cache = |uris: &[String]| uris.iter().any(|uri| uri.contains("resourceVersion=0"));
        assert!(
            from_cache(&pod_lists),
            "the pod watch's LIST reads etcd: {pod_lists:?}"
        );
    }
    env.stop_cleanly().await;
}

//! How nmo's watches get their first lists: in the WATCH itself (a streaming list) where the API
//! server serves them, by LIST then WATCH where it refuses them. Simulator only: a refusal is
//! injected as a fault.

use nmo_sim::{FaultRule, Query};

use crate::support::{OPERATOR_AGENT, TestEnv};

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

//! The kube adapter's finalizer write: one PATCH against the list as last seen, and a fresh
//! read only when that list turned out stale (someone else's finalizer is never lost).

use nmo::cluster::KubeCluster;
use nmo_actors::ports::Cluster;
use nmo_sim::{Query, Scenario};
use serde_json::json;

use super::cluster::{self, OPERATOR_AGENT};

const FINALIZER: &str = "foregroundDeleteNodeMaintenance";

fn finalizers(sim: &nmo_sim::SimHandle, name: &str) -> Vec<String> {
    cluster::maintenance(sim, name).expect("the NodeMaintenance exists")["metadata"]["finalizers"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finalizer_is_added_without_reading_when_the_seen_list_is_current() {
    let sim = cluster::start(Scenario::plain(1, 1).pdb(None)).await;
    let client = cluster::test_client(&sim);
    cluster::create_maintenance(&client, "nm-0", "node-0").await;
    let adapter = KubeCluster::new((cluster::operator_client(&sim))(), None);

    adapter.add_finalizer("nm-0", &[]).await.expect("added");

    assert_eq!(finalizers(&sim, "nm-0"), [FINALIZER]);
    let ours = |q: Query| sim.requests(&q.user_agent(OPERATOR_AGENT));
    assert_eq!(
        ours(Query::all().verb("get").resource("nodemaintenances")),
        0
    );
    assert_eq!(
        ours(Query::all().verb("patch").resource("nodemaintenances")),
        1
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_seen_list_is_re_read_and_keeps_the_other_finalizers() {
    let sim = cluster::start(Scenario::plain(1, 1).pdb(None)).await;
    sim.create_json(
        "nodemaintenance.medik8s.io",
        "nodemaintenances",
        "",
        json!({
            "apiVersion": "nodemaintenance.medik8s.io/v1beta1",
            "kind": "NodeMaintenance",
            "metadata": {"name": "nm-0", "finalizers": ["example.com/keep"]},
            "spec": {"nodeName": "node-0"}
        }),
        false,
    )
    .expect("created");
    let adapter = KubeCluster::new((cluster::operator_client(&sim))(), None);

    // Seen before the other finalizer arrived: the first write's test fails, the retry reads.
    adapter.add_finalizer("nm-0", &[]).await.expect("added");

    assert_eq!(finalizers(&sim, "nm-0"), ["example.com/keep", FINALIZER]);
    let ours = |q: Query| sim.requests(&q.user_agent(OPERATOR_AGENT));
    assert_eq!(
        ours(Query::all().verb("get").resource("nodemaintenances")),
        1
    );
    assert_eq!(
        ours(Query::all().verb("patch").resource("nodemaintenances")),
        2
    );
    sim.shutdown().await;
}

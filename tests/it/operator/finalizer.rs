//! The kube adapter's finalizer write: one PATCH against the list as last seen, and a fresh
//! read only when that list turned out stale (someone else's finalizer is never lost).

use nmo::cluster::KubeCluster;
use nmo_actors::ports::Cluster;
use nmo_sim::Query;
use serde_json::json;

use crate::support::{Backend, TestEnv, TestEnvBuilder, both_backends};

const FINALIZER: &str = "foregroundDeleteNodeMaintenance";

async fn finalizers(env: &TestEnv, name: &str) -> Vec<String> {
    env.maintenance(name)
        .await
        .expect("the NodeMaintenance exists")["metadata"]["finalizers"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A cluster of one node with `nm-0` as `seed` creates it, without nmo; nmo's finalizer is
/// added to `nm-0` through the kube adapter, as nmo adds it having seen no finalizer.
async fn finalizer_added_to(
    backend: Backend,
    seed: impl FnOnce(TestEnvBuilder) -> TestEnvBuilder,
) -> TestEnv {
    let env = seed(TestEnv::on(backend).nodes(1, 1)).start_idle().await;
    let adapter = KubeCluster::new(env.operator_client(), None);
    adapter
        .add_finalizer(&env.name("nm-0").into(), &[])
        .await
        .expect("added");
    env
}

/// nmo's requests counted by the simulator's accounting or the real API server's audit log.
async fn a_finalizer_is_added_without_reading_when_the_seen_list_is_current(backend: Backend) {
    let env = finalizer_added_to(backend, |env| env.maintenance("nm-0", "node-0")).await;

    assert_eq!(finalizers(&env, "nm-0").await, [FINALIZER]);
    assert_reads_and_patches(&env, 0, 1);
}
both_backends!(a_finalizer_is_added_without_reading_when_the_seen_list_is_current);

/// nmo's requests counted by the simulator's accounting or the real API server's audit log.
/// `nm-0` was seen before the other finalizer arrived: the first write's test fails, the
/// retry reads.
async fn a_stale_seen_list_is_re_read_and_keeps_the_other_finalizers(backend: Backend) {
    let env = finalizer_added_to(backend, |env| {
        env.object(json!({
            "apiVersion": "nodemaintenance.medik8s.io/v1beta1",
            "kind": "NodeMaintenance",
            "metadata": {"name": "nm-0", "finalizers": ["example.com/keep"]},
            "spec": {"nodeName": "node-0"}
        }))
    })
    .await;

    assert_eq!(
        finalizers(&env, "nm-0").await,
        ["example.com/keep", FINALIZER]
    );
    assert_reads_and_patches(&env, 1, 2);
}
both_backends!(a_stale_seen_list_is_re_read_and_keeps_the_other_finalizers);

/// nmo's requests on NodeMaintenances (the simulator's accounting or the real API server's
/// audit log): `gets` reads and `patches` patches.
fn assert_reads_and_patches(env: &TestEnv, gets: u64, patches: u64) {
    let ours = |verb: &str| {
        env.count_operator_requests(&Query::all().verb(verb).resource("nodemaintenances"))
    };
    assert_eq!(
        (ours("get"), ours("patch")),
        (gets, patches),
        "(gets, patches)"
    );
}

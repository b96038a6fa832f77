//! Acting on exactly the pod the drain decided on: every eviction and pod deletion carries the
//! pod's uid as its precondition, and a request waiting for a budget is dropped the moment its
//! pod leaves the node. Run on the real API server above all: the preconditions are its own.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use nmo::cluster::KubeCluster;
use nmo_actors::model::Uid;
use nmo_actors::ports::{Cluster, ClusterError, EvictionOutcome};

use crate::support::{Backend, TestEnv, both_backends, eventually};

/// A drain held by a budget that allows no disruption; a person deletes the stuck `web-0` and
/// its controller (here: the test) creates `web-0` again on the other node. When the budget
/// later allows every disruption, only `web-1`, still on the maintained node, may go, never
/// the new `web-0` on node-1: the request for the old `web-0` went with it.
async fn a_held_eviction_never_follows_its_pod_name_to_another_node(backend: Backend) {
    let mut env = TestEnv::on(backend)
        .nodes(2, 0)
        .namespace_with_pods("web", "web", &[("web-0", "node-0"), ("web-1", "node-0")])
        .pdb("web", "web-budget", "web", 2)
        .start_with_maintenance("nm-0", "node-0")
        .await;
    env.wait_blocked_by("nm-0", "web-budget").await;

    let pods: Api<Pod> = Api::namespaced(env.admin_client(), &env.ns("web"));
    // On the simulator the eviction of web-0 may have gone through before the budget counted
    // both pods; then it is gone already, and the new web-0 below must still be left alone.
    match pods
        .delete("web-0", &DeleteParams::default().grace_period(0))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(error) => panic!("a person deletes the stuck pod: {error}"),
    }
    eventually("web-0 to be gone", Duration::from_secs(20), async || {
        !env.pod_exists("web", "web-0").await
    })
    .await;
    env.create_pod("web", "web-0", "node-1", "web").await;
    eventually(
        "the new web-0 to be ready on node-1",
        Duration::from_secs(20),
        async || {
            env.get_json::<Pod>(Some("web"), "web-0")
                .await
                .is_some_and(|pod| {
                    pod["status"]["conditions"].as_array().is_some_and(|c| {
                        c.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
                })
        },
    )
    .await;

    // Both may go now, as far as the budget is concerned.
    env.relax_pdb("web", "web-budget", 0).await;
    env.wait_succeeded("nm-0").await;
    let web_0 = env
        .get_json::<Pod>(Some("web"), "web-0")
        .await
        .expect("the new web-0 is still there");
    assert_eq!(web_0["spec"]["nodeName"], env.name("node-1"));
    assert!(
        web_0["metadata"]["deletionTimestamp"].is_null(),
        "the new web-0 is not being deleted: {web_0}"
    );
    assert!(!env.pod_exists("web", "web-1").await, "web-1 was evicted");
    env.stop_cleanly().await;
}

both_backends!(a_held_eviction_never_follows_its_pod_name_to_another_node);

/// The adapter's own calls, against the API server's preconditions: an eviction or a deletion
/// naming a uid the pod of that name no longer has touches nothing, and reads as "gone".
async fn an_eviction_or_deletion_naming_another_uid_touches_nothing(backend: Backend) {
    let env = TestEnv::on(backend)
        .nodes(1, 0)
        .namespace_with_pods("web", "web", &[("web-0", "node-0"), ("web-1", "node-0")])
        .start_idle()
        .await;
    let adapter = KubeCluster::new(env.operator_client(), None);
    let web = env.ns("web");
    let stale = &Uid::from("00000000-0000-0000-0000-000000000000");

    let outcome = adapter.evict_pod(&web, "web-0", stale, None).await;
    assert_eq!(outcome, Ok(EvictionOutcome::NotFound));
    let deleted = adapter.delete_pod(&web, "web-1", stale, Some(0)).await;
    assert!(
        matches!(deleted, Err(ClusterError::NotFound(_))),
        "{deleted:?}"
    );
    for name in ["web-0", "web-1"] {
        let pod = env
            .get_json::<Pod>(Some("web"), name)
            .await
            .unwrap_or_else(|| panic!("{name} is still there"));
        assert!(pod["metadata"]["deletionTimestamp"].is_null(), "{pod}");
    }

    // With the pod's own uid, both go.
    for name in ["web-0", "web-1"] {
        let pod = env
            .get_json::<Pod>(Some("web"), name)
            .await
            .expect("exists");
        let uid = Uid::from(pod["metadata"]["uid"].as_str().expect("a uid"));
        if name == "web-0" {
            let outcome = adapter.evict_pod(&web, name, &uid, None).await;
            assert_eq!(outcome, Ok(EvictionOutcome::Evicted));
        } else {
            adapter
                .delete_pod(&web, name, &uid, Some(0))
                .await
                .expect("deleted");
        }
    }
}

both_backends!(an_eviction_or_deletion_naming_another_uid_touches_nothing);

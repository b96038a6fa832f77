//! DaemonSet pods: an orphan (its DaemonSet gone) is evicted, so a budget covering it is
//! honoured, and the pods of a DaemonSet created again under the same name are not taken for
//! the old one's orphans. Simulator only: its DaemonSets make no pods, so a test places the
//! DaemonSet's pods itself, and an orphan is a pod whose owner reference names a DaemonSet uid
//! that is gone (a real cluster's controllers would make, adopt and collect them).

use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use serde_json::json;

use crate::support::{Phase, TestEnv, TestEnvBuilder, eventually};

/// Creates the DaemonSet `agent` in `workloads`; returns its uid.
async fn create_agent_daemonset(env: &TestEnv) -> String {
    env.create_object(json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "workloads"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "agent", "image": "registry.invalid/agent:1"}]}
            }
        }
    }))
    .await;
    let daemonset = env
        .get_json::<DaemonSet>(Some("workloads"), "agent")
        .await
        .expect("the DaemonSet");
    daemonset["metadata"]["uid"]
        .as_str()
        .expect("a uid")
        .to_string()
}

/// The uid of a DaemonSet `agent` that is gone.
const GONE: &str = "4b1d2c3e-0000-4000-8000-00000000dead";

/// A pod of the DaemonSet `agent` with uid `uid`, on `node`, with label `app`.
async fn create_agent_pod(env: &TestEnv, name: &str, uid: &str, app: &str) {
    env.create_object(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "workloads",
            "labels": {"app": app},
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": uid,
                "controller": true,
            }],
        },
        "spec": {
            "nodeName": "node-0",
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "agent", "image": "registry.invalid/agent:1"}]
        }
    }))
    .await;
}

/// One node and the namespace `workloads`, on the simulator.
fn workloads() -> TestEnvBuilder {
    TestEnv::builder()
        .budgeted_nodes(1, 0)
        .namespace("workloads")
}

/// Starts `cluster` with the budget `pdb` over `app=<app>` in `workloads` (`minAvailable: 1`),
/// puts the orphaned DaemonSet pod `orphan` on node-0, and waits until `nm-0`'s drain of node-0
/// is blocked by the budget.
async fn orphan_under_a_blocked_drain(
    cluster: TestEnvBuilder,
    orphan: &str,
    (pdb, app): (&str, &str),
) -> TestEnv {
    let env = cluster.pdb("workloads", pdb, app, 1).start().await;
    create_agent_pod(&env, orphan, GONE, "agent").await;
    env.create_maintenance("nm-0", "node-0").await;
    env.wait_blocked_by("nm-0", pdb).await;
    env
}

/// The DaemonSet `agent` is gone (its pod on the node is an orphan, and removed), then created
/// again under the same name: its new pod on the node is the new DaemonSet's, and stays,
/// however many drain passes follow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemonset_created_again_keeps_its_new_pods() {
    let env = orphan_under_a_blocked_drain(
        // A drain that stays blocked: it goes on passing over the node's pods.
        workloads().pod("workloads", "db-0", "node-0", "db"),
        "agent-old",
        ("db-budget", "db"),
    )
    .await;
    eventually("the orphan removed", Duration::from_secs(20), async || {
        !env.pod_exists("workloads", "agent-old").await
    })
    .await;
    let new = create_agent_daemonset(&env).await;
    create_agent_pod(&env, "agent-new", &new, "agent").await;
    // Several retry ticks of the blocked drain.
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert!(
        env.pod_exists("workloads", "agent-new").await,
        "the new DaemonSet's pod was removed as an orphan"
    );
    assert_eq!(env.phase("nm-0").await, Some(Phase::Running));
}

/// An orphaned DaemonSet pod that a budget protects is evicted, not deleted: the budget
/// refuses, the pod stays, and the maintenance says it is blocked by the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphan_a_budget_protects_is_not_deleted() {
    let env = orphan_under_a_blocked_drain(workloads(), "agent-0", ("agent-budget", "agent")).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(
        env.pod_exists("workloads", "agent-0").await,
        "the protected orphan was deleted: {:?}",
        env.operator_requests()
            .iter()
            .filter(|(verb, resource, _)| resource.starts_with("pods") && verb != "watch")
            .collect::<Vec<_>>()
    );
    assert_eq!(env.phase("nm-0").await, Some(Phase::Running));
}

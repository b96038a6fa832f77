//! nmo draining the nodes it runs on. nmo's two replicas are pods of the cluster (either
//! backend), made from deploy/base/deployment.yaml's pod template (labels, tolerations,
//! spread) by a ReplicaSet, guarded by deploy/base/pdb.yaml; each pod runs one in-process nmo
//! with leader election, and a replica whose pod is evicted stops as a killed process would (a
//! new pod gets a new replica). The cluster's scheduler places new pods as the template allows.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use nmo::operator::OperatorOptions;
use nmo_sim::Scenario;
use serde_json::{Value, json};

use crate::support::{Backend, Operator, Phase, TestEnv, both_backends, eventually, test_options};

/// nmo's namespace in deploy/.
const NMO_NAMESPACE: &str = "nmo-system";
/// The ReplicaSet of nmo's Deployment.
const REPLICASET: &str = "nmo-6f7c9d";
/// Where the test's workload runs.
const APP: &str = "shop";
const CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";
/// The nodes of each test's cluster.
const NODES: usize = 3;
/// How long a drain, a takeover or an undo may take here.
const TIMEOUT: Duration = Duration::from_secs(60);

fn manifest(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/base")
        .join(name);
    let text = std::fs::read_to_string(&path).expect("the manifest is readable");
    serde_yaml::from_str(&text).expect("the manifest is YAML")
}

/// deploy/base/deployment.yaml.
fn deployment() -> Value {
    manifest("deployment.yaml")
}

/// The label selector of nmo's pods, as `key=value,...`.
fn nmo_selector() -> String {
    deployment()["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels")
        .iter()
        .map(|(key, value)| format!("{key}={}", value.as_str().expect("a string label")))
        .collect::<Vec<_>>()
        .join(",")
}

/// nmo with leader election (short timings) as the replica of pod `pod`.
fn replica_options(pod: &str) -> OperatorOptions {
    OperatorOptions {
        leader_elect: true,
        leader_elect_lease_duration: Duration::from_secs(3),
        leader_elect_renew_deadline: Duration::from_secs(2),
        leader_elect_retry_period: Duration::from_millis(300),
        pod_name: Some(pod.to_string()),
        ..test_options()
    }
}

/// The pod that holds the leader lease (identities are `<pod>_<random>`), in nmo's namespace.
async fn leader_pod(env: &TestEnv) -> Option<String> {
    let lease = env
        .get_json::<Lease>(
            Some(env.operator_namespace()),
            nmo::leader::LEADER_ELECTION_ID,
        )
        .await?;
    let holder = lease["spec"]["holderIdentity"].as_str()?;
    let (pod, _) = holder.rsplit_once('_')?;
    Some(pod.to_string())
}

/// nmo's Deployment as it would be in the cluster: its ReplicaSet from the manifest's pod
/// template and replicas, and its PodDisruptionBudget.
async fn install_nmo(env: &TestEnv) {
    let deployment = deployment();
    let rs: ReplicaSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": REPLICASET, "namespace": NMO_NAMESPACE,
                     "labels": deployment["spec"]["template"]["metadata"]["labels"]},
        "spec": {
            "replicas": deployment["spec"]["replicas"],
            "selector": deployment["spec"]["selector"],
            "template": deployment["spec"]["template"],
        }
    }))
    .expect("a ReplicaSet");
    Api::<ReplicaSet>::namespaced(env.admin_client(), NMO_NAMESPACE)
        .create(&PostParams::default(), &rs)
        .await
        .expect("the ReplicaSet is created");
    env.create_object(manifest("pdb.yaml")).await;
}

/// The test's name (`node-<i>`) of the node the cluster calls `cluster_name`; None for an
/// empty name or a node not the test's.
fn test_node(env: &TestEnv, cluster_name: &str) -> Option<String> {
    (0..NODES)
        .map(|i| format!("node-{i}"))
        .find(|node| !cluster_name.is_empty() && env.name(node) == cluster_name)
}

/// The nmo replicas, one per scheduled nmo pod: what the kubelet does for nmo's pods.
#[derive(Default)]
struct Replicas {
    running: BTreeMap<String, Operator>,
    /// Replicas killed because their pod was evicted, by pod name.
    killed: Vec<String>,
}

impl Replicas {
    /// nmo's pods that exist, are not terminating, and are bound to a node: (name, node as
    /// the test names it).
    async fn live_pods(env: &TestEnv) -> BTreeMap<String, String> {
        let params = ListParams::default().labels(&nmo_selector());
        env.list_json::<Pod>(Some(NMO_NAMESPACE), &params)
            .await
            .into_iter()
            .filter(|pod| pod["metadata"]["deletionTimestamp"].is_null())
            .filter_map(|pod| {
                let node = test_node(env, pod["spec"]["nodeName"].as_str()?)?;
                let name = pod["metadata"]["name"].as_str()?.to_string();
                Some((name, node))
            })
            .collect()
    }

    /// Kills the replicas whose pod is gone or terminating (as a killed process: nothing is
    /// cleaned up), and starts one for each new pod.
    async fn sync(&mut self, env: &TestEnv) {
        let live = Self::live_pods(env).await;
        let gone: Vec<String> = self
            .running
            .keys()
            .filter(|pod| !live.contains_key(*pod))
            .cloned()
            .collect();
        for pod in gone {
            if let Some(replica) = self.running.remove(&pod) {
                replica.kill().await;
                self.killed.push(pod);
            }
        }
        for pod in live.keys() {
            if !self.running.contains_key(pod) {
                let replica = env.start_another_operator(replica_options(pod));
                self.running.insert(pod.clone(), replica);
            }
        }
    }
}

/// The leader's own node is put into maintenance: draining it evicts the leader's pod, the
/// leader dies with it, the standby takes over and finishes the drain.
async fn the_leader_s_node_is_drained_and_the_standby_finishes_it(backend: Backend) {
    // On each of the two nodes nmo runs on, a pod that a budget keeps there until the test
    // relaxes it: the drain cannot finish before the leader is gone.
    let env = TestEnv::on(backend)
        .scenario(Scenario::plain(NODES, 2).pdb(None))
        .namespace(NMO_NAMESPACE)
        .namespace(APP)
        .pod(APP, "db-0", "node-0", "db")
        .pod(APP, "db-1", "node-1", "db")
        .pdb(APP, "db", "db", 2)
        .start_idle()
        .await;
    // The scheduler places nmo's two pods on node-0 and node-1: node-2 is cordoned meanwhile
    // (the nodes are equally loaded, so the second pod goes where the first did not).
    env.patch_node("node-2", json!({"spec": {"unschedulable": true}}))
        .await;
    install_nmo(&env).await;
    let mut replicas = Replicas::default();
    eventually("nmo's pods on node-0 and node-1", TIMEOUT, async || {
        let nodes: Vec<String> = Replicas::live_pods(&env).await.into_values().collect();
        nodes.len() == 2 && nodes.contains(&"node-0".into()) && nodes.contains(&"node-1".into())
    })
    .await;
    env.patch_node("node-2", json!({"spec": {"unschedulable": false}}))
        .await;
    replicas.sync(&env).await;
    assert_eq!(replicas.running.len(), 2, "two replicas on two nodes");
    eventually("a leader", TIMEOUT, async || {
        leader_pod(&env).await.is_some()
    })
    .await;
    let first = leader_pod(&env).await.expect("a leader");
    let pods = Replicas::live_pods(&env).await;
    let node = pods[&first].clone();

    env.create_maintenance("nm-leader", &node).await;
    eventually(
        "the leader's pod to be evicted (and its replica killed)",
        TIMEOUT,
        async || {
            replicas.sync(&env).await;
            replicas.killed.contains(&first)
        },
    )
    .await;
    eventually("another replica to lead", TIMEOUT, async || {
        replicas.sync(&env).await;
        leader_pod(&env).await.is_some_and(|pod| pod != first)
    })
    .await;
    assert_eq!(
        env.phase("nm-leader").await,
        Some(Phase::Running),
        "the budget still holds the drain: the new leader must finish it"
    );
    // The other replica's pod was never touched.
    let standby = pods.keys().find(|pod| **pod != first).expect("the standby");
    assert!(env.pod_exists(NMO_NAMESPACE, standby).await);

    env.relax_pdb(APP, "db", 1).await;
    eventually("the maintenance to finish", TIMEOUT, async || {
        replicas.sync(&env).await;
        env.phase("nm-leader").await == Some(Phase::Succeeded)
    })
    .await;
    let status = env.status("nm-leader").await;
    assert_eq!(status["drainProgress"], 100, "{status}");
    let left: Vec<String> = env
        .pods_on(&node)
        .await
        .iter()
        .filter_map(|pod| pod["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    assert!(
        !left.contains(&first) && !left.iter().any(|pod| pod.starts_with("db-")),
        "{left:?}"
    );
}
both_backends!(the_leader_s_node_is_drained_and_the_standby_finishes_it);

/// Every worker in maintenance: nmo's evicted replicas find room only on the control-plane
/// node (the manifest tolerates its taint), so the maintenances can still be ended.
async fn maintenances_end_when_every_worker_is_in_maintenance(backend: Backend) {
    let env = TestEnv::on(backend)
        .scenario(Scenario::plain(NODES, 2).pdb(None))
        .namespace(NMO_NAMESPACE)
        .start_idle()
        .await;
    let control_plane = "node-0";
    let workers = ["node-1", "node-2"];
    env.patch_node(
        control_plane,
        json!({
            "metadata": {"labels": {CONTROL_PLANE: ""}},
            "spec": {"taints": [{"key": CONTROL_PLANE, "effect": "NoSchedule"}]}
        }),
    )
    .await;
    // The scheduler places nmo's pods, as the manifest's tolerations let it.
    install_nmo(&env).await;
    let mut replicas = Replicas::default();
    eventually("two replicas and a leader", TIMEOUT, async || {
        replicas.sync(&env).await;
        replicas.running.len() == 2 && leader_pod(&env).await.is_some()
    })
    .await;

    let placed = Replicas::live_pods(&env).await;
    assert!(
        placed.values().any(|node| node != control_plane),
        "a replica starts on a worker, so draining the workers evicts it: {placed:?}"
    );
    for worker in workers {
        env.create_maintenance(&format!("nm-{worker}"), worker)
            .await;
    }
    eventually("every worker drained", TIMEOUT, async || {
        replicas.sync(&env).await;
        let mut done = true;
        for worker in workers {
            done &= env.phase(&format!("nm-{worker}")).await == Some(Phase::Succeeded);
        }
        done
    })
    .await;
    eventually(
        "nmo to run on the control plane only, leading",
        TIMEOUT,
        async || {
            replicas.sync(&env).await;
            let pods = Replicas::live_pods(&env).await;
            let leader = leader_pod(&env).await;
            pods.len() == 2
                && pods.values().all(|node| node == control_plane)
                && leader.is_some_and(|pod| pods.contains_key(&pod))
        },
    )
    .await;

    assert!(
        !replicas.killed.is_empty(),
        "a replica was evicted and replaced"
    );
    for worker in workers {
        env.delete_maintenance(&format!("nm-{worker}")).await;
    }
    eventually(
        "the maintenances to be undone and gone",
        TIMEOUT,
        async || {
            replicas.sync(&env).await;
            let mut gone = true;
            for worker in workers {
                gone &= env.maintenance(&format!("nm-{worker}")).await.is_none();
            }
            gone
        },
    )
    .await;
    for worker in workers {
        let node = env.node(worker).await;
        assert_ne!(node["spec"]["unschedulable"], true, "{worker} uncordoned");
        assert!(
            crate::support::taint_keys(&node).is_empty(),
            "{worker}: {:?}",
            crate::support::taint_keys(&node)
        );
    }
}
both_backends!(maintenances_end_when_every_worker_is_in_maintenance);

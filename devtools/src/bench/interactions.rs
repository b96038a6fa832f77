//! Scenario d's additions to the simulated cluster: a budget that can never allow a
//! disruption on one maintained node, and a ReplicaSet that can run only on two maintained
//! nodes (so the replacement of any of its pods fits only nodes another maintenance cordons: a
//! cross-node deadlock), each with what nmo must say about it.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use nmo_sim::SimHandle;
use serde_json::{Value, json};

use super::error::BenchError;
use crate::demo::{DemoError, maintenance};

/// The namespace of the budget that never allows a disruption.
pub const STRUCTURAL_NS: &str = "bench-structural";
/// The namespace of the ReplicaSet confined to two maintained nodes.
pub const PAIR_NS: &str = "bench-pair";
/// The node label confining the pair ReplicaSet.
const POOL_LABEL: &str = "bench.nmo.io/pool";
/// Replicas of the pair ReplicaSet (two per node).
const PAIR_REPLICAS: usize = 4;
/// How long the added pods may take to be Running and Ready.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Which maintained nodes carry which trap (indices into the scenario's nodes).
#[derive(Debug, Clone, Copy)]
pub struct Traps {
    /// The node holding the pod of the budget that never allows.
    pub structural: usize,
    /// The two nodes the pair ReplicaSet is confined to.
    pub pair: (usize, usize),
}

/// What a blocked maintenance must show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedBlock {
    /// The NodeMaintenance.
    pub maintenance: String,
    /// Its node.
    pub node: String,
    /// The `DrainBlocked` reason.
    pub reason: &'static str,
    /// A text its message must contain (e.g. the other maintenance of a deadlock).
    pub mentions: String,
}

impl Traps {
    /// What each trapped maintenance must show, for nodes named by `node_name`.
    pub fn expected(&self, node_name: impl Fn(usize) -> String) -> Vec<ExpectedBlock> {
        let structural = node_name(self.structural);
        let (a, b) = (node_name(self.pair.0), node_name(self.pair.1));
        let block = |node: &str, reason, mentions: String| ExpectedBlock {
            maintenance: maintenance::name_for(node),
            node: node.to_string(),
            reason,
            mentions,
        };
        vec![
            block(
                &structural,
                "StructuralBudget",
                "maxUnavailable is 0".into(),
            ),
            block(&a, "CrossNodeDeadlock", maintenance::name_for(&b)),
            block(&b, "CrossNodeDeadlock", maintenance::name_for(&a)),
        ]
    }
}

fn setup(what: &'static str) -> impl Fn(kube::Error) -> BenchError {
    move |source| BenchError::Setup {
        what: what.to_string(),
        source,
    }
}

fn object<K: serde::de::DeserializeOwned>(value: Value) -> Result<K, BenchError> {
    Ok(serde_json::from_value(value)?)
}

fn replica_set(namespace: &str, app: &str, replicas: usize, node_selector: Value) -> Value {
    let mut spec = nmo_sim::scenario::pod_spec(app, false);
    spec["nodeSelector"] = node_selector;
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": app, "namespace": namespace, "labels": {"app": app}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": app}},
            "template": {"metadata": {"labels": {"app": app}}, "spec": spec}
        }
    })
}

fn pdb_manifest(namespace: &str, app: &str, max_unavailable: u32) -> Value {
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": app, "namespace": namespace},
        "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": {"app": app}}}
    })
}

/// Adds the traps to the cluster (as its admin, through `client`) and waits for their pods to
/// be Ready.
pub async fn set_up(
    client: &Client,
    sim: &SimHandle,
    traps: Traps,
    node_name: impl Fn(usize) -> String,
) -> Result<(), BenchError> {
    let post = PostParams::default();
    let nodes: Api<Node> = Api::all(client.clone());
    for index in [traps.pair.0, traps.pair.1] {
        let patch = json!({"metadata": {"labels": {POOL_LABEL: "pair"}}});
        nodes
            .patch(
                &node_name(index),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(setup("a node label"))?;
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in [STRUCTURAL_NS, PAIR_NS] {
        let namespace = object(json!({"metadata": {"name": ns}}))?;
        namespaces
            .create(&post, &namespace)
            .await
            .map_err(setup("a namespace"))?;
    }
    let structural_node = node_name(traps.structural);
    let sets = [
        (
            STRUCTURAL_NS,
            "ledger",
            1,
            json!({"kubernetes.io/hostname": structural_node}),
            0,
        ),
        (
            PAIR_NS,
            "pair",
            PAIR_REPLICAS,
            json!({POOL_LABEL: "pair"}),
            1,
        ),
    ];
    for (ns, app, replicas, selector, max_unavailable) in sets {
        let rs: ReplicaSet = object(replica_set(ns, app, replicas, selector))?;
        Api::<ReplicaSet>::namespaced(client.clone(), ns)
            .create(&post, &rs)
            .await
            .map_err(setup("a ReplicaSet"))?;
        let pdb: PodDisruptionBudget = object(pdb_manifest(ns, app, max_unavailable))?;
        Api::<PodDisruptionBudget>::namespaced(client.clone(), ns)
            .create(&post, &pdb)
            .await
            .map_err(setup("a PodDisruptionBudget"))?;
    }
    let deadline = Instant::now() + READY_TIMEOUT;
    while ready(sim, STRUCTURAL_NS) < 1 || ready(sim, PAIR_NS) < PAIR_REPLICAS {
        if Instant::now() > deadline {
            return Err(DemoError::Timeout {
                what: "the scenario's added pods to be Ready".into(),
                after: READY_TIMEOUT,
            }
            .into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

fn ready(sim: &SimHandle, namespace: &str) -> usize {
    sim.list_json("", "pods", namespace)
        .iter()
        .filter(|p| nmo_sim::pdb::pod_ready(p))
        .count()
}

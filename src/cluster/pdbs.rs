//! The drain policy's side of the adapter: the shared PodDisruptionBudget watch and the few
//! reads that explain a blocked PDB, with the conversions to the actors' domain types.

use std::future::Future;
use std::time::Duration;

use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as KubeSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::ListParams;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use nmo_actors::model::{EXCLUDE_LABEL, EXCLUDE_LABEL_VALUE, Maintenance, NodeState};
use nmo_actors::pdb::{
    IntOrPercent, LabelSelector, Pdb, PdbChange, PdbStatus, SelectorOperator, SelectorRequirement,
};
use nmo_actors::pdb::{PdbPod, Toleration};
use nmo_actors::ports::ClusterError;

use super::convert;
use super::errors::to_cluster_error;
use super::watch::{self, InitialLists};
use super::watch_health::WatchReporter;
use crate::crd::NodeMaintenance;

/// How long one diagnosis read may take.
const READ_DEADLINE: Duration = Duration::from_secs(10);
/// At most this many of a PDB's pods are read: enough to find the one it waits for.
const PDB_POD_PAGE: u32 = 500;

async fn with_deadline<T>(
    what: &str,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, ClusterError> {
    match tokio::time::timeout(READ_DEADLINE, call).await {
        Ok(result) => result.map_err(to_cluster_error),
        Err(_) => Err(ClusterError::Transient(format!(
            "{what} took longer than {} s",
            READ_DEADLINE.as_secs()
        ))),
    }
}

/// Every PodDisruptionBudget: the whole list first and after every relist, then each change.
/// Failures are retried by [`watch::events`], reported to `health`.
pub fn watch_pdbs(
    client: Client,
    lists: InitialLists,
    health: WatchReporter,
) -> BoxStream<'static, PdbChange> {
    let api: Api<PodDisruptionBudget> = Api::all(client);
    let mut listing: Vec<Pdb> = Vec::new();
    watch::events(api, watcher::Config::default(), lists, health)
        .filter_map(move |event| {
            let change = match event {
                Event::Init => {
                    listing.clear();
                    None
                }
                Event::InitApply(pdb) => {
                    listing.push(domain_pdb(&pdb));
                    None
                }
                Event::InitDone => Some(PdbChange::Listed(std::mem::take(&mut listing))),
                Event::Apply(pdb) => Some(PdbChange::Applied(domain_pdb(&pdb))),
                Event::Delete(pdb) => Some(PdbChange::Deleted {
                    namespace: pdb.namespace().unwrap_or_default(),
                    name: pdb.name_any(),
                }),
            };
            futures::future::ready(change)
        })
        .boxed()
}

/// The pods of `namespace` that `selector` selects (one page).
pub async fn selected_pods(
    client: Client,
    namespace: &str,
    selector: &LabelSelector,
) -> Result<Vec<PdbPod>, ClusterError> {
    let api: Api<Pod> = Api::namespaced(client, namespace);
    let params = ListParams::default()
        .labels(&selector.to_query())
        .limit(PDB_POD_PAGE);
    let pods = with_deadline("listing a budget's pods", api.list(&params)).await?;
    Ok(pods.items.iter().map(pdb_pod).collect())
}

/// The nodes carrying the maintenance label.
pub async fn maintained_nodes(client: Client) -> Result<Vec<NodeState>, ClusterError> {
    let api: Api<Node> = Api::all(client);
    let params = ListParams::default().labels(&format!("{EXCLUDE_LABEL}={EXCLUDE_LABEL_VALUE}"));
    let nodes = with_deadline("listing the nodes in maintenance", api.list(&params)).await?;
    Ok(nodes.items.iter().map(convert::node_state).collect())
}

/// Every NodeMaintenance.
pub async fn maintenances(client: Client) -> Result<Vec<Maintenance>, ClusterError> {
    let api: Api<NodeMaintenance> = Api::all(client);
    let list = with_deadline(
        "listing the NodeMaintenances",
        api.list(&ListParams::default()),
    )
    .await?;
    Ok(list.items.iter().map(convert::maintenance).collect())
}

// --- conversions ----------------------------------------------------------------------------

fn int_or_percent(value: &IntOrString) -> Option<IntOrPercent> {
    match value {
        IntOrString::Int(n) => Some(IntOrPercent::Int(*n)),
        IntOrString::String(s) => match s.strip_suffix('%') {
            Some(p) => p.parse().ok().map(IntOrPercent::Percent),
            None => s.parse().ok().map(IntOrPercent::Int),
        },
    }
}

/// A label selector as the actors match it; None when it has an operator nmo does not know
/// (such a selector selects nothing for nmo, and the API server refuses it anyway).
pub fn selector(value: &KubeSelector) -> Option<LabelSelector> {
    let mut match_expressions = Vec::new();
    for r in value.match_expressions.iter().flatten() {
        let operator = match r.operator.as_str() {
            "In" => SelectorOperator::In,
            "NotIn" => SelectorOperator::NotIn,
            "Exists" => SelectorOperator::Exists,
            "DoesNotExist" => SelectorOperator::DoesNotExist,
            _ => return None,
        };
        match_expressions.push(SelectorRequirement {
            key: r.key.clone(),
            operator,
            values: r.values.clone().unwrap_or_default(),
        });
    }
    Some(LabelSelector {
        match_labels: value.match_labels.clone().unwrap_or_default(),
        match_expressions,
    })
}

/// The domain view of a PodDisruptionBudget.
pub fn domain_pdb(pdb: &PodDisruptionBudget) -> Pdb {
    let spec = pdb.spec.as_ref();
    let status = pdb.status.as_ref().map(|s| {
        let sync_failed = s
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "DisruptionAllowed" && c.reason == "SyncFailed")
            .map(|c| c.message.clone());
        PdbStatus {
            observed_generation: s.observed_generation.unwrap_or(0),
            disruptions_allowed: s.disruptions_allowed,
            current_healthy: s.current_healthy,
            desired_healthy: s.desired_healthy,
            expected_pods: s.expected_pods,
            disrupted_pods: s
                .disrupted_pods
                .as_ref()
                .map(|d| d.keys().cloned().collect())
                .unwrap_or_default(),
            sync_failed,
        }
    });
    Pdb {
        namespace: pdb.namespace().unwrap_or_default(),
        name: pdb.name_any(),
        generation: pdb.metadata.generation.unwrap_or(0),
        selector: spec.and_then(|s| s.selector.as_ref()).and_then(selector),
        min_available: spec
            .and_then(|s| s.min_available.as_ref())
            .and_then(int_or_percent),
        max_unavailable: spec
            .and_then(|s| s.max_unavailable.as_ref())
            .and_then(int_or_percent),
        always_allow_unhealthy: spec.and_then(|s| s.unhealthy_pod_eviction_policy.as_deref())
            == Some("AlwaysAllow"),
        status,
    }
}

/// A pod as the diagnosis reads it.
pub fn pdb_pod(pod: &Pod) -> PdbPod {
    let info = convert::pod_info(pod);
    let spec = pod.spec.as_ref();
    let unschedulable = convert::pod_condition(pod, "PodScheduled")
        .filter(|c| c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
        .map(|c| c.message.clone().unwrap_or_default());
    PdbPod {
        namespace: info.namespace.to_string(),
        name: info.name.to_string(),
        controller: info.controller,
        phase: info.phase,
        ready: info.ready,
        terminating: info.terminating,
        node_name: spec.and_then(|s| s.node_name.clone()),
        unschedulable,
        node_selector: spec
            .and_then(|s| s.node_selector.clone())
            .unwrap_or_default(),
        tolerations: spec
            .and_then(|s| s.tolerations.as_ref())
            .into_iter()
            .flatten()
            .map(|t| Toleration {
                key: t.key.clone().unwrap_or_default(),
                exists: t.operator.as_deref() == Some("Exists"),
                value: t.value.clone().unwrap_or_default(),
                effect: t.effect.clone().unwrap_or_default(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_pdb_keeps_its_numbers_selector_and_disrupted_pods() {
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "shop", "generation": 3},
            "spec": {
                "maxUnavailable": "25%",
                "selector": {
                    "matchLabels": {"app": "web"},
                    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]
                },
                "unhealthyPodEvictionPolicy": "AlwaysAllow"
            },
            "status": {
                "observedGeneration": 3, "disruptionsAllowed": 1, "currentHealthy": 4,
                "desiredHealthy": 3, "expectedPods": 4,
                "disruptedPods": {"web-1": "2026-01-01T00:00:00Z"},
                "conditions": [{"type": "DisruptionAllowed", "status": "True",
                    "reason": "SufficientPods", "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]
            }
        }))
        .unwrap();
        let b = domain_pdb(&pdb);
        assert_eq!(b.key(), "shop/web");
        assert_eq!(b.max_unavailable, Some(IntOrPercent::Percent(25)));
        assert!(b.always_allow_unhealthy);
        let status = b.fresh_status().unwrap();
        assert_eq!(status.disruptions_allowed, 1);
        assert!(status.disrupted_pods.contains("web-1"));
        assert_eq!(status.sync_failed, None);
        assert_eq!(b.selector.unwrap().to_query(), "app=web,tier in (a)");
    }

    #[test]
    fn an_unschedulable_pod_says_why_and_keeps_what_placing_it_needs() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-x", "namespace": "shop", "labels": {"app": "web"}},
            "spec": {
                "containers": [{"name": "c"}],
                "nodeSelector": {"disk": "ssd"},
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
            },
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled",
                "status": "False", "reason": "Unschedulable",
                "message": "0/3 nodes are available"}]}
        }))
        .unwrap();
        let p = pdb_pod(&pod);
        assert_eq!(p.unschedulable.as_deref(), Some("0/3 nodes are available"));
        assert!(!p.ready);
        assert_eq!(p.node_selector.get("disk").map(String::as_str), Some("ssd"));
        assert!(p.tolerations[0].exists);
        let unknown = KubeSelector {
            match_expressions: Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                    key: "a".into(),
                    operator: "Near".into(),
                    values: None,
                },
            ]),
            ..KubeSelector::default()
        };
        assert!(selector(&unknown).is_none());
    }
}

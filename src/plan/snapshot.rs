//! Reading what the plan needs, once, read-only: every node (decoded into a slim type, in
//! pages), the pods of the planned nodes, every PodDisruptionBudget, the DaemonSets their pods
//! name, and, for control-plane nodes, the NodeMaintenances and the etcd guard's pods. Each
//! call has its own deadline.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DynamicObject, ListParams};
use kube::core::{Selector, SelectorExt};
use kube::{Api, Client, Resource, ResourceExt};
use nmo_actors::decisions::daemonset_of;
use nmo_actors::interception::{EvictionWebhooks, VMI_KIND, pod_is_virt_launcher};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::error::PlanError;
use super::interceptors::Vms;
use super::model::{NodeFacts, PlanInput, PodFacts};
use crate::cluster::convert::pod_info;
use crate::cluster::slim_node::SlimStatus;
use crate::cluster::{eviction_webhooks, vms};
use crate::crd::NodeMaintenance;
use crate::webhook::rules::{self, CONTROL_PLANE_LABELS, ETCD_NAMESPACE, EtcdGuard};

/// How long one API call may take.
pub const CALL_DEADLINE: Duration = Duration::from_secs(30);
/// Objects per LIST page.
const PAGE: u32 = 200;
/// The label whose topology means "one per node" in an anti-affinity term.
const HOSTNAME_TOPOLOGY: &str = "kubernetes.io/hostname";
/// A cordon's own taint (the cordon itself is counted already).
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// What to plan for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanRequest {
    /// Nodes named.
    pub nodes: Vec<String>,
    /// A label selector adding every node it matches.
    pub selector: Option<String>,
}

/// A Node with only what the plan reads (images, nodeInfo and the rest are skipped).
#[derive(Resource, Deserialize, Clone, Debug)]
#[resource(inherit = Node)]
struct PlanNode {
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<PlanNodeSpec>,
    #[serde(default)]
    status: Option<SlimStatus>,
}

#[derive(Deserialize, Clone, Debug, Default)]
struct PlanNodeSpec {
    #[serde(default)]
    unschedulable: Option<bool>,
    #[serde(default)]
    taints: Option<Vec<PlanTaint>>,
}

#[derive(Deserialize, Clone, Debug, Default)]
struct PlanTaint {
    key: String,
    effect: String,
}

fn node_facts(node: &PlanNode) -> NodeFacts {
    let spec = node.spec.clone().unwrap_or_default();
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let tainted = spec.taints.iter().flatten().any(|t| {
        t.key != UNSCHEDULABLE_TAINT && (t.effect == "NoSchedule" || t.effect == "NoExecute")
    });
    let labels = node.labels();
    NodeFacts {
        name: node.name_any(),
        ready,
        unschedulable: spec.unschedulable.unwrap_or(false),
        tainted,
        control_plane: CONTROL_PLANE_LABELS.iter().any(|l| labels.contains_key(*l)),
    }
}

/// Runs one call under [`CALL_DEADLINE`].
async fn bounded<T>(
    what: &str,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, PlanError> {
    match tokio::time::timeout(CALL_DEADLINE, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(source)) => Err(PlanError::Read {
            what: what.to_string(),
            source,
        }),
        Err(_) => Err(PlanError::Timeout {
            what: what.to_string(),
            after: CALL_DEADLINE,
        }),
    }
}

/// Every object `params` selects, page by page.
async fn list_all<K>(api: &Api<K>, params: ListParams, what: &str) -> Result<Vec<K>, PlanError>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut params = params.limit(PAGE);
    let mut items = Vec::new();
    loop {
        let page = bounded(what, api.list(&params)).await?;
        items.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(items),
        }
    }
}

fn pod_facts(pod: &Pod) -> PodFacts {
    let labels = pod.labels().clone();
    let one_per_node = pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .is_some_and(|terms| {
            terms.iter().any(|term| {
                term.topology_key == HOSTNAME_TOPOLOGY
                    && term
                        .label_selector
                        .clone()
                        .and_then(|s| Selector::try_from(s).ok())
                        .is_some_and(|s| !s.selects_all() && s.matches(&labels))
            })
        });
    PodFacts {
        info: pod_info(pod),
        one_per_node,
    }
}

/// Reads everything the plan needs.
pub async fn read(client: &Client, request: &PlanRequest) -> Result<PlanInput, PlanError> {
    // Over 80 lines: the plan's reads in order (nodes, the nodes chosen, their pods, DaemonSets,
    // budgets), each a short loop feeding the next.
    let nodes_api: Api<PlanNode> = Api::all(client.clone());
    let all_nodes = list_all(&nodes_api, ListParams::default(), "list nodes").await?;
    let nodes: BTreeMap<String, NodeFacts> = all_nodes
        .iter()
        .map(node_facts)
        .map(|n| (n.name.clone(), n))
        .collect();
    drop(all_nodes);

    let mut planned: Vec<String> = Vec::new();
    for name in &request.nodes {
        if !planned.contains(name) {
            planned.push(name.clone());
        }
    }
    if let Some(selector) = &request.selector {
        let what = format!("list nodes matching {selector}");
        let selected = list_all(&nodes_api, ListParams::default().labels(selector), &what).await?;
        let mut names: Vec<String> = selected.iter().map(ResourceExt::name_any).collect();
        names.sort();
        for name in names {
            if !planned.contains(&name) {
                planned.push(name);
            }
        }
    }
    if planned.is_empty() {
        return Err(PlanError::NoNodes);
    }

    let pods_api: Api<Pod> = Api::all(client.clone());
    let mut pods = BTreeMap::new();
    let mut daemonsets = BTreeSet::new();
    for node in &planned {
        let params = ListParams::default().fields(&format!("spec.nodeName={node}"));
        let on_node = list_all(&pods_api, params, &format!("list the pods of node {node}")).await?;
        for pod in &on_node {
            if let Some(key) = daemonset_of(&pod_info(pod)) {
                daemonsets.insert(key);
            }
        }
        pods.insert(node.clone(), on_node.iter().map(pod_facts).collect());
    }
    let mut existing = BTreeSet::new();
    for (namespace, name) in daemonsets {
        let api: Api<DaemonSet> = Api::namespaced(client.clone(), &namespace);
        let what = format!("get DaemonSet {namespace}/{name}");
        if bounded(&what, api.get_opt(&name)).await?.is_some() {
            existing.insert((namespace, name));
        }
    }

    let pdbs_api: Api<PodDisruptionBudget> = Api::all(client.clone());
    let listed = list_all(
        &pdbs_api,
        ListParams::default(),
        "list PodDisruptionBudgets",
    )
    .await?;
    let pdbs = listed
        .iter()
        .map(crate::cluster::pdbs::domain_pdb)
        .collect();
    let etcd_pdbs: Vec<PodDisruptionBudget> = listed
        .into_iter()
        .filter(|pdb| pdb.namespace().as_deref() == Some(ETCD_NAMESPACE))
        .collect();

    let control_plane: Vec<&String> = planned
        .iter()
        .filter(|n| nodes.get(*n).is_some_and(|f| f.control_plane))
        .collect();
    let mut maintenances = Vec::new();
    let mut guard_pods = Vec::new();
    if let Some(first) = control_plane.first() {
        let api: Api<NodeMaintenance> = Api::all(client.clone());
        maintenances = list_all(&api, ListParams::default(), "list NodeMaintenances").await?;
        if let Ok(EtcdGuard::CheckGuardPods { selector }) = rules::etcd_guard(first, &etcd_pdbs) {
            let api: Api<Pod> = Api::namespaced(client.clone(), ETCD_NAMESPACE);
            let what = format!("list the etcd guard pods ({selector})");
            guard_pods = list_all(&api, ListParams::default().labels(&selector), &what).await?;
        }
    }
    let eviction_webhooks = read_eviction_webhooks(client).await;
    let vms = read_vms(client, &pods).await;
    Ok(PlanInput {
        planned,
        nodes,
        pods,
        pdbs,
        daemonsets: existing,
        maintenances,
        etcd_pdbs,
        guard_pods,
        eviction_webhooks,
        vms,
    })
}

/// The admission webhooks on `pods/eviction`; none when the configurations cannot be read
/// (the plan then says nothing of interceptors).
async fn read_eviction_webhooks(client: &Client) -> EvictionWebhooks {
    let mut names = BTreeSet::new();
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    if let Ok(list) = bounded(
        "list webhook configurations",
        validating.list(&ListParams::default()),
    )
    .await
    {
        names.extend(list.items.iter().flat_map(eviction_webhooks::validating));
    }
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    if let Ok(list) = bounded(
        "list webhook configurations",
        mutating.list(&ListParams::default()),
    )
    .await
    {
        names.extend(list.items.iter().flat_map(eviction_webhooks::mutating));
    }
    EvictionWebhooks { names }
}

/// The VirtualMachineInstances of the launcher pods among `pods`, where KubeVirt's API is
/// served (one discovery call, one GET per VM).
async fn read_vms(client: &Client, pods: &BTreeMap<String, Vec<PodFacts>>) -> Vms {
    let owners: BTreeSet<(String, String)> = pods
        .values()
        .flatten()
        .filter(|p| pod_is_virt_launcher(&p.info))
        .filter_map(|p| {
            let owner = p.info.controller.as_ref().filter(|c| c.kind == VMI_KIND)?;
            Some((p.info.namespace.to_string(), owner.name.clone()))
        })
        .collect();
    let mut vms = Vms::new();
    if owners.is_empty()
        || bounded(
            "discover KubeVirt",
            client.list_api_group_resources(vms::GROUP_VERSION),
        )
        .await
        .is_err()
    {
        return vms;
    }
    for (namespace, name) in owners {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &namespace, &vms::resource());
        let what = format!("get VirtualMachineInstance {namespace}/{name}");
        if let Ok(Some(vmi)) = bounded(&what, api.get_opt(&name)).await {
            vms.insert((namespace, name), vms::vm_info(&vmi));
        }
    }
    vms
}

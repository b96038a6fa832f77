//! KubeVirt's VirtualMachineInstances (`kubevirt.io/v1`, read only), for the drain of a node
//! with VMs to say what each VM does, in KubeVirt's words. Only where KubeVirt is installed:
//! whether the API is served is asked once (discovery) and remembered, by every node's watch
//! of the process; without it nothing is watched, nothing logged, and the question is asked
//! again every few minutes (KubeVirt may be installed later).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::stream::{BoxStream, StreamExt};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher;
use kube::{Api, Client};
use nmo_actors::model::{ConditionStatus, VmCondition, VmInfo, VmList, VmMigration};
use serde_json::Value;
use tokio::time::Instant;

use super::watch::{self, InitialLists};
use super::watch_health::WatchHealth;

/// The group and version KubeVirt serves VMIs in.
pub(crate) const GROUP_VERSION: &str = "kubevirt.io/v1";
/// The label KubeVirt puts on a VMI with the node it runs on.
const NODE_LABEL: &str = "kubevirt.io/nodeName";
/// How long a "not served" answer holds before discovery is asked again.
const RECHECK: Duration = Duration::from_secs(300);
/// The deadline of the discovery call.
const DISCOVERY_DEADLINE: Duration = Duration::from_secs(10);

pub(crate) fn resource() -> ApiResource {
    ApiResource {
        group: "kubevirt.io".into(),
        version: "v1".into(),
        api_version: GROUP_VERSION.into(),
        kind: "VirtualMachineInstance".into(),
        plural: "virtualmachineinstances".into(),
    }
}

/// Whether the cluster serves VMIs, as last found out, shared by every watch of a client.
#[derive(Debug, Clone, Default)]
pub struct KubeVirtApi {
    known: Arc<Mutex<Option<(bool, Instant)>>>,
}

impl KubeVirtApi {
    /// Whether VMIs are served: remembered once they are; a "no" is asked again after
    /// [`RECHECK`]. A failed discovery counts as "no" for now.
    async fn served(&self, client: &Client) -> bool {
        let cached = *self.known.lock().unwrap_or_else(|e| e.into_inner());
        match cached {
            Some((true, _)) => return true,
            Some((false, at)) if at.elapsed() < RECHECK => return false,
            _ => {}
        }
        let answer = tokio::time::timeout(
            DISCOVERY_DEADLINE,
            client.list_api_group_resources(GROUP_VERSION),
        )
        .await;
        let served = match answer {
            Ok(Ok(list)) => list
                .resources
                .iter()
                .any(|r| r.name == "virtualmachineinstances"),
            Ok(Err(error)) => {
                tracing::debug!(%error, "KubeVirt's API is not served");
                false
            }
            Err(_) => false,
        };
        *self.known.lock().unwrap_or_else(|e| e.into_inner()) = Some((served, Instant::now()));
        served
    }

    /// When to ask again after a "no".
    fn next_look(&self) -> Duration {
        let cached = *self.known.lock().unwrap_or_else(|e| e.into_inner());
        cached.map_or(RECHECK, |(_, at)| RECHECK.saturating_sub(at.elapsed()))
    }
}

fn time(value: &Value) -> Option<DateTime<Utc>> {
    value
        .as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
}

fn text(value: &Value) -> Option<String> {
    value.as_str().filter(|s| !s.is_empty()).map(str::to_string)
}

/// The drain's view of a VMI.
pub(crate) fn vm_info(vmi: &DynamicObject) -> VmInfo {
    let (spec, status) = (&vmi.data["spec"], &vmi.data["status"]);
    let migratable = status["conditions"].as_array().and_then(|conditions| {
        conditions
            .iter()
            .find(|c| c["type"] == "LiveMigratable")
            .map(|c| VmCondition {
                status: ConditionStatus::parse(c["status"].as_str().unwrap_or_default()),
                reason: text(&c["reason"]),
                message: text(&c["message"]),
            })
    });
    let state = &status["migrationState"];
    let migration = state.is_object().then(|| VmMigration {
        target_node: text(&state["targetNode"]),
        started: time(&state["startTimestamp"]),
        ended: time(&state["endTimestamp"]),
        completed: state["completed"].as_bool().unwrap_or(false),
        failed: state["failed"].as_bool().unwrap_or(false),
        target_ready: !state["targetNodeDomainReadyTimestamp"].is_null(),
    });
    VmInfo {
        namespace: vmi.metadata.namespace.clone().unwrap_or_default(),
        name: vmi.metadata.name.clone().unwrap_or_default(),
        eviction_strategy: text(&spec["evictionStrategy"]),
        migratable,
        evacuation_node: text(&status["evacuationNodeName"]),
        migration,
        node: text(&status["nodeName"]),
    }
}

/// The VMIs on `node`, once KubeVirt's API is served: the whole list after every change. The
/// watch reports to `health` only once it runs: a cluster without KubeVirt has no VMI watch to
/// be down.
pub fn watch(
    client: Client,
    lists: InitialLists,
    health: WatchHealth,
    api: KubeVirtApi,
    node: &str,
) -> BoxStream<'static, VmList> {
    let selector = format!("{NODE_LABEL}={node}");
    let name = format!("VirtualMachineInstances on node {node}");
    async_stream::stream! {
        while !api.served(&client).await {
            tokio::time::sleep(api.next_look()).await;
        }
        let vmis: Api<DynamicObject> = Api::all_with(client, &resource());
        let config = watch::per_node(watcher::Config::default().labels(&selector));
        let mut lists = watch::snapshots(vmis, config, lists, health.register(name), vm_info);
        while let Some(list) = lists.next().await {
            yield list;
        }
    }
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vmi_is_read_in_kubevirt_words() {
        let vmi: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": "vm-a", "namespace": "vms"},
            "spec": {"evictionStrategy": "LiveMigrate"},
            "status": {
                "nodeName": "n1",
                "evacuationNodeName": "n1",
                "conditions": [{"type": "LiveMigratable", "status": "True"}],
                "migrationState": {"targetNode": "n2", "startTimestamp": "2026-11-30T10:00:00Z",
                                   "targetNodeDomainReadyTimestamp": "2026-11-30T10:00:05Z"}
            }
        }))
        .expect("a VMI");
        let vm = vm_info(&vmi);
        assert_eq!(vm.eviction_strategy.as_deref(), Some("LiveMigrate"));
        assert_eq!(vm.evacuation_node.as_deref(), Some("n1"));
        assert_eq!(vm.migratable.map(|c| c.status), Some(ConditionStatus::True));
        let migration = vm.migration.expect("a migration");
        assert_eq!(migration.target_node.as_deref(), Some("n2"));
        assert!(migration.running() && migration.target_ready);
        assert!(migration.started.is_some());
    }
}

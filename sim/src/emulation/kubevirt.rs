//! KubeVirt, emulated as kubevirt/kubevirt's docs/handling-eviction-requests.md documents it:
//! - virt-api's validating webhook (`virt-launcher-eviction-interceptor.kubevirt.io`) sees
//!   every eviction. For a launcher pod of a VMI with `evictionStrategy: LiveMigrate` that is
//!   migratable (or `LiveMigrateIfPossible` and migratable, or `External`), it marks the VMI
//!   for evacuation (`status.evacuationNodeName`, the pod's node) and approves; for a
//!   `LiveMigrate` one that is not migratable it refuses with a 429.
//! - The API server then asks the budget KubeVirt keeps over every such launcher pod
//!   (`minAvailable: 1` over the one pod): 429. "The eviction request's initiator might get a
//!   429 response, but the VMI will be migrated in the background."
//! - The migration controller ([`KubeVirt`]'s) sees the mark, widens the budget to cover the
//!   target pod too ("the PDB that protects the source virt-launcher pod is expended by the
//!   migration controller to also protect the target pod"), starts the target launcher pod on
//!   another node, and when the migration is done the source pod finishes (phase Succeeded),
//!   the VMI runs on the target node (`status.nodeName`, label `kubevirt.io/nodeName`) and the
//!   budget narrows again. At most [`MigrationOptions::parallel`] migrations run at once, and
//!   [`MigrationOptions::per_node`] out of one node (KubeVirt's `parallelMigrationsPerCluster`
//!   and `parallelOutboundMigrationsPerNode`, 5 and 2 by default).
//!
//! The VirtualMachineInstance API is a minimal CRD ([`install_vmi_crd`], `kubevirt.io/v1`,
//! any fields): enough for the webhook, the controller and nmo to read and write what
//! KubeVirt's would.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::interceptor::Interceptor;
use super::webhook::{Eviction, Verdict};
use super::{EmulationError, lock, ready, wait_for};

/// The webhook's name in KubeVirt's virt-api-validator configuration.
pub const WEBHOOK: &str = "virt-launcher-eviction-interceptor.kubevirt.io";
/// The configuration the emulation registers it in.
const CONFIGURATION: &str = "nmo-sim-emulated-virt-api-validator";
/// How often the controller looks at the VMIs.
const LOOK_EVERY: Duration = Duration::from_millis(100);
/// How long a migration waits for its target pod to be ready (it goes on regardless).
const TARGET_READY_WITHIN: Duration = Duration::from_secs(60);

fn vmi_resource() -> ApiResource {
    ApiResource {
        group: "kubevirt.io".into(),
        version: "v1".into(),
        api_version: "kubevirt.io/v1".into(),
        kind: "VirtualMachineInstance".into(),
        plural: "virtualmachineinstances".into(),
    }
}

/// The VirtualMachineInstances of `namespace`.
pub fn vmis(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &vmi_resource())
}

/// Installs the minimal VirtualMachineInstance CRD unless it is there, and waits (up to 30 s)
/// until the API serves it.
pub async fn install_vmi_crd(client: &kube::Client) -> Result<(), EmulationError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "virtualmachineinstances.kubevirt.io"},
        "spec": {
            "group": "kubevirt.io",
            "scope": "Namespaced",
            "names": {"kind": "VirtualMachineInstance", "plural": "virtualmachineinstances",
                      "singular": "virtualmachineinstance", "shortNames": ["vmi", "vmis"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object",
                                               "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))?;
    match crds.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => return Err(error.into()),
    }
    let probe = vmis(client, "default");
    for _ in 0..300 {
        if probe.list(&ListParams::default().limit(1)).await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
    Err(EmulationError::NotReady(
        "the VirtualMachineInstance API is not served".into(),
    ))
}

/// A VM: its VMI's name and uid, and the launcher pod it was created with.
#[derive(Debug, Clone)]
pub struct Vm {
    /// The VMI's name.
    pub name: String,
    /// The VMI's uid.
    pub uid: String,
    /// Its first launcher pod.
    pub source_pod: String,
}

fn budget_name(vm: &str) -> String {
    format!("kubevirt-disruption-budget-{vm}")
}

/// A launcher pod of `vm` on `node`, as virt-controller creates one.
fn launcher_pod(
    namespace: &str,
    name: &str,
    vm: &str,
    vm_uid: &str,
    node: &str,
) -> Result<Pod, EmulationError> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": vm_uid,
                       "vm.kubevirt.io/name": vm},
            "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                                 "name": vm, "uid": vm_uid, "controller": true,
                                 "blockOwnerDeletion": true}]
        },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "compute", "image": "registry.invalid/virt-launcher:1"}]
        }
    }))?)
}

/// Creates a running VM `name` on `node` with `strategy` (migratable or not), its budget and
/// its launcher pod, as KubeVirt leaves them.
pub async fn create_vm(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    node: &str,
    strategy: &str,
    migratable: bool,
) -> Result<Vm, EmulationError> {
    let api = vmis(client, namespace);
    let vmi: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kubevirt.io/nodeName": node}},
        "spec": {"evictionStrategy": strategy, "domain": {"devices": {}}}
    }))?;
    let created = api.create(&PostParams::default(), &vmi).await?;
    let uid = created.metadata.uid.clone().unwrap_or_default();
    let condition = if migratable {
        json!({"type": "LiveMigratable", "status": "True"})
    } else {
        json!({"type": "LiveMigratable", "status": "False", "reason": "DisksNotLiveMigratable",
               "message": "cannot migrate VMI: PVC rootdisk is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)"})
    };
    let status =
        json!({"status": {"phase": "Running", "nodeName": node, "conditions": [condition]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), namespace);
    let budget: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": budget_name(name), "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"kubevirt.io/created-by": uid}}}
    }))?;
    budgets.create(&PostParams::default(), &budget).await?;
    let source_pod = format!("virt-launcher-{name}-0");
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pod = launcher_pod(namespace, &source_pod, name, &uid, node)?;
    pods.create(&PostParams::default(), &pod).await?;
    Ok(Vm {
        name: name.to_string(),
        uid,
        source_pod,
    })
}

/// What the emulated KubeVirt did.
#[derive(Debug, Default, Clone)]
pub struct KubeVirtLog {
    /// Eviction requests the webhook saw, by launcher pod.
    pub requests: BTreeMap<String, u32>,
    /// Migrations started (a running launcher pod found to migrate), by VM.
    pub migrations: BTreeMap<String, u32>,
    /// How long each migration that completed took, start to finish.
    pub durations: Vec<Duration>,
}

/// How the migration controller migrates.
#[derive(Debug, Clone)]
pub struct MigrationOptions {
    /// The nodes a VM may migrate to (the first schedulable one, in turn).
    pub targets: Vec<String>,
    /// How long a migration takes once its target pod runs.
    pub migration_time: Duration,
    /// Migrations at once, cluster wide (KubeVirt's `parallelMigrationsPerCluster`).
    pub parallel: usize,
    /// Migrations at once out of one node (`parallelOutboundMigrationsPerNode`).
    pub per_node: usize,
}

/// The webhook's answer for `eviction`, as virt-api's (the doc's "Pod Eviction Webhook").
async fn review(client: kube::Client, log: Arc<Mutex<KubeVirtLog>>, eviction: Eviction) -> Verdict {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &eviction.namespace);
    let Ok(Some(pod)) = pods.get_opt(&eviction.name).await else {
        return Verdict::Allow;
    };
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    if labels.get("kubevirt.io").map(String::as_str) != Some("virt-launcher") {
        return Verdict::Allow;
    }
    *lock(&log)
        .requests
        .entry(eviction.name.clone())
        .or_default() += 1;
    let Some(vm) = labels.get("vm.kubevirt.io/name") else {
        return Verdict::Allow;
    };
    let api = vmis(&client, &eviction.namespace);
    let Ok(vmi) = api.get(vm).await else {
        return Verdict::Allow;
    };
    let strategy = vmi.data["spec"]["evictionStrategy"]
        .as_str()
        .unwrap_or("None");
    let migratable = vmi.data["status"]["conditions"]
        .as_array()
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "LiveMigratable" && c["status"] == "True")
        });
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    let marks = match strategy {
        "LiveMigrate" if !migratable => {
            return Verdict::Deny(
                429,
                format!(
                    "VMI {}/{vm} is configured with an eviction strategy but is not live-migratable",
                    eviction.namespace
                ),
            );
        }
        "LiveMigrate" | "External" => true,
        "LiveMigrateIfPossible" => migratable,
        _ => false,
    };
    let running_here = vmi.data["status"]["nodeName"].as_str() == Some(node.as_str());
    if marks && running_here && vmi.data["status"]["evacuationNodeName"].is_null() {
        let mark = json!({"status": {"evacuationNodeName": node}});
        let _ = api
            .patch_status(vm, &PatchParams::default(), &Patch::Merge(&mark))
            .await;
    }
    Verdict::Allow
}

/// Sets `minAvailable` of the VM's budget.
async fn set_budget(
    client: &kube::Client,
    namespace: &str,
    vm: &str,
    min_available: i32,
) -> Result<(), EmulationError> {
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), namespace);
    let patch = json!({"spec": {"minAvailable": min_available}});
    budgets
        .patch(
            &budget_name(vm),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(())
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The VM's running launcher pod on `node`.
async fn active_pod(pods: &Api<Pod>, uid: &str, node: &str) -> Option<String> {
    let selector = format!("kubevirt.io/created-by={uid}");
    let list = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .ok()?;
    list.items
        .into_iter()
        .find(|p| {
            p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
                && p.metadata.deletion_timestamp.is_none()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
        .and_then(|p| p.metadata.name)
}

/// One live migration of VM `vm` from `source` to `target`, as KubeVirt's migration
/// controller does it (counted in `log` once it starts). A VM whose launcher pod is gone has
/// nothing to migrate: its mark is dropped.
async fn migrate(
    client: kube::Client,
    namespace: String,
    vm: String,
    (source, target): (String, String),
    migration_time: Duration,
    log: Arc<Mutex<KubeVirtLog>>,
) -> Result<(), EmulationError> {
    let api = vmis(&client, &namespace);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let vmi = api.get(&vm).await?;
    let uid = vmi.metadata.uid.clone().unwrap_or_default();
    let Some(source_pod) = active_pod(&pods, &uid, &source).await else {
        let unmark = json!({"status": {"evacuationNodeName": null}});
        api.patch_status(&vm, &PatchParams::default(), &Patch::Merge(&unmark))
            .await?;
        return Err(EmulationError::NotReady(format!(
            "no running launcher pod of {vm} on {source}"
        )));
    };
    let n = count_migration(&log, &vm);
    set_budget(&client, &namespace, &vm, 2).await?;
    let target_pod = format!("virt-launcher-{vm}-{n}");
    let pod = launcher_pod(&namespace, &target_pod, &vm, &uid, &target)?;
    pods.create(&PostParams::default(), &pod).await?;
    let started_at = now();
    let state = |ended_at: Option<String>| {
        migration_state(&source, &target, &target_pod, &started_at, ended_at)
    };
    let started = json!({"status": {"migrationState": state(None)}});
    api.patch_status(&vm, &PatchParams::default(), &Patch::Merge(&started))
        .await?;
    wait_for(&pods, &target_pod, TARGET_READY_WITHIN, |p| {
        p.is_some_and(ready)
    })
    .await;
    tokio::time::sleep(migration_time).await;
    // The source's virt-launcher exits once the VM runs on the target.
    let finished = json!({"status": {"phase": "Succeeded", "conditions": [
        {"type": "Ready", "status": "False", "reason": "PodCompleted"}
    ]}});
    pods.patch_status(
        &source_pod,
        &PatchParams::default(),
        &Patch::Merge(&finished),
    )
    .await?;
    let done = json!({"status": {
        "nodeName": target, "evacuationNodeName": null, "migrationState": state(Some(now()))
    }});
    api.patch_status(&vm, &PatchParams::default(), &Patch::Merge(&done))
        .await?;
    let label = json!({"metadata": {"labels": {"kubevirt.io/nodeName": target}}});
    api.patch(&vm, &PatchParams::default(), &Patch::Merge(&label))
        .await?;
    set_budget(&client, &namespace, &vm, 1).await
}

/// Counts a migration of `vm` in `log`; which one of the VM's it is.
fn count_migration(log: &Mutex<KubeVirtLog>, vm: &str) -> u32 {
    let mut log = lock(log);
    let count = log.migrations.entry(vm.to_string()).or_default();
    *count += 1;
    *count
}

/// A VMI's `status.migrationState` of a migration started at `started_at` (and completed at
/// `ended_at`, once it is).
fn migration_state(
    source: &str,
    target: &str,
    target_pod: &str,
    started_at: &str,
    ended_at: Option<String>,
) -> Value {
    let mut state = json!({
        "sourceNode": source, "targetNode": target, "targetPod": target_pod,
        "startTimestamp": started_at, "completed": ended_at.is_some(), "failed": false
    });
    if let Some(ended_at) = ended_at {
        state["endTimestamp"] = json!(ended_at);
    }
    state
}

/// The first of `targets` but `source`, from `turn` on, that takes pods (not cordoned).
async fn pick_target(
    client: &kube::Client,
    targets: &[String],
    source: &str,
    turn: usize,
) -> Option<String> {
    let nodes: Api<Node> = Api::all(client.clone());
    for i in 0..targets.len() {
        let name = &targets[(turn + i) % targets.len()];
        if name == source {
            continue;
        }
        let cordoned = nodes
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .and_then(|n| n.spec.and_then(|s| s.unschedulable))
            .unwrap_or(false);
        if !cordoned {
            return Some(name.clone());
        }
    }
    None
}

/// The migrations running: by VM, its source node.
type Running = Arc<Mutex<HashMap<String, String>>>;

/// One look of the controller: starts the migrations the marks and the limits allow.
async fn look(
    client: &kube::Client,
    namespace: &str,
    options: &MigrationOptions,
    running: &Running,
    log: &Arc<Mutex<KubeVirtLog>>,
    turn: &mut usize,
) {
    let Ok(list) = vmis(client, namespace).list(&ListParams::default()).await else {
        return;
    };
    for vmi in list.items {
        let name = vmi.metadata.name.clone().unwrap_or_default();
        let Some(source) = vmi.data["status"]["evacuationNodeName"].as_str() else {
            continue;
        };
        {
            let running = lock(running);
            let out_of_source = running.values().filter(|s| *s == source).count();
            if running.contains_key(&name)
                || running.len() >= options.parallel
                || out_of_source >= options.per_node
            {
                continue;
            }
        }
        let Some(target) = pick_target(client, &options.targets, source, *turn).await else {
            continue;
        };
        *turn += 1;
        lock(running).insert(name.clone(), source.to_string());
        let (client, namespace, running, log) = (
            client.clone(),
            namespace.to_string(),
            running.clone(),
            log.clone(),
        );
        let (source, time) = (source.to_string(), options.migration_time);
        tokio::spawn(async move {
            let began = tokio::time::Instant::now();
            let result = migrate(
                client,
                namespace,
                name.clone(),
                (source, target),
                time,
                log.clone(),
            )
            .await;
            match result {
                Ok(()) => lock(&log).durations.push(began.elapsed()),
                Err(error) => tracing::warn!(vm = %name, %error, "emulated migration failed"),
            }
            lock(&running).remove(&name);
        });
    }
}

/// The emulated KubeVirt of one namespace: its eviction webhook and its migration controller.
/// Stopped (the webhook unregistered) by [`KubeVirt::stop`]; dropped, its tasks end.
pub struct KubeVirt(Interceptor<KubeVirtLog>);

impl KubeVirt {
    /// Starts the webhook (registered with the API server of `client`) and the migration
    /// controller of the VMs in `namespace`.
    pub async fn start(
        client: &kube::Client,
        namespace: &str,
        options: MigrationOptions,
    ) -> Result<Self, EmulationError> {
        let (looker, namespace) = (client.clone(), namespace.to_string());
        let interceptor = Interceptor::start(
            client,
            CONFIGURATION,
            WEBHOOK,
            review,
            |looked| async move {
                let running: Running = Arc::default();
                let mut turn = 0;
                loop {
                    tokio::time::sleep(LOOK_EVERY).await;
                    look(&looker, &namespace, &options, &running, &looked, &mut turn).await;
                }
            },
        )
        .await?;
        Ok(KubeVirt(interceptor))
    }

    /// What it did so far.
    pub fn log(&self) -> KubeVirtLog {
        self.0.log()
    }

    /// Unregisters the webhook and stops the controller (the server stops with `self`).
    pub async fn stop(self) {
        self.0.stop().await;
    }
}

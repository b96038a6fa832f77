//! KubeVirt, emulated as kubevirt/kubevirt's docs/handling-eviction-requests.md documents it:
//! - virt-api's validating webhook (`virt-launcher-eviction-interceptor.kubevirt.io`) sees
//!   every eviction. For a launcher pod of a VMI with `evictionStrategy: LiveMigrate` that is
//!   migratable, it marks the VMI for evacuation (`status.evacuationNodeName`, the pod's node)
//!   and approves; for one that is not migratable it refuses with a 429.
//! - The API server then asks the budget KubeVirt keeps over every such launcher pod
//!   (`minAvailable: 1` over the one pod): 429. "The eviction request's initiator might get a
//!   429 response, but the VMI will be migrated in the background."
//! - The migration controller (here the test's `migrate`) sees the mark, widens the budget to
//!   cover the target pod too ("the PDB that protects the source virt-launcher pod is expended
//!   by the migration controller to also protect the target pod"), starts the target launcher
//!   pod on another node, and when the migration is done the source pod finishes (phase
//!   Succeeded), the VMI runs on the target node, and the budget narrows again.
//!
//! The VirtualMachineInstance API is a minimal CRD of the tests' (`kubevirt.io/v1`, any
//! fields): enough for the webhook, the controller and nmo to read and write what KubeVirt's
//! would.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use nmo_sim::Scenario;
use serde_json::json;

use super::https::{Eviction, Verdict, WebhookServer, unregister};
use super::pods::PodWatch;
use crate::support::{Backend, TestEnv, both_backends, eventually};

/// The webhook's name in KubeVirt's virt-api-validator configuration.
pub const WEBHOOK: &str = "virt-launcher-eviction-interceptor.kubevirt.io";
const CONFIGURATION: &str = "nmo-test-virt-api-validator";
/// How long a live migration takes here, once its target pod runs.
const MIGRATION_TIME: Duration = Duration::from_secs(2);

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

/// Installs the tests' minimal VirtualMachineInstance CRD unless it is there, and waits until
/// the API serves it.
pub async fn ensure_vmi_crd(client: &kube::Client) {
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
    }))
    .expect("a valid CRD");
    match crds.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("installing the VirtualMachineInstance CRD: {error}"),
    }
    let probe = vmis(client, "default");
    eventually(
        "the VirtualMachineInstance API to be served",
        Duration::from_secs(30),
        async || probe.list(&ListParams::default().limit(1)).await.is_ok(),
    )
    .await;
}

/// A VM of the test: its VMI's name and uid, and its source launcher pod.
#[derive(Debug, Clone)]
pub struct Vm {
    pub name: String,
    pub uid: String,
    pub source_pod: String,
}

fn budget_name(vm: &str) -> String {
    format!("kubevirt-disruption-budget-{vm}")
}

/// A launcher pod of `vm` on `node`, as virt-controller creates one.
fn launcher_pod(namespace: &str, name: &str, vm: &str, vm_uid: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
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
    }))
    .expect("a valid launcher pod")
}

/// Creates a running VM `name` on `node` with `strategy` (migratable or not), its budget and
/// its launcher pod, as KubeVirt leaves them.
pub async fn create_vm(
    env: &TestEnv,
    namespace: &str,
    name: &str,
    node: &str,
    strategy: &str,
    migratable: bool,
) -> Vm {
    let client = env.admin_client();
    let namespace = env.ns(namespace);
    let node = env.name(node);
    let api = vmis(&client, &namespace);
    let vmi: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kubevirt.io/nodeName": node}},
        "spec": {"evictionStrategy": strategy, "domain": {"devices": {}}}
    }))
    .expect("a valid VMI");
    let created = api
        .create(&PostParams::default(), &vmi)
        .await
        .expect("the VMI is created");
    let uid = created.metadata.uid.clone().expect("a uid");
    let (status, reason) = if migratable {
        ("True", "")
    } else {
        ("False", "DisksNotLiveMigratable")
    };
    let message = if migratable {
        String::new()
    } else {
        "cannot migrate VMI: PVC rootdisk is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)".to_string()
    };
    let status = json!({"status": {
        "phase": "Running", "nodeName": node,
        "conditions": [{"type": "LiveMigratable", "status": status, "reason": reason,
                        "message": message}]
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("the VMI's status is written");
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &namespace);
    let budget: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": budget_name(name), "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"kubevirt.io/created-by": uid}}}
    }))
    .expect("a valid budget");
    budgets
        .create(&PostParams::default(), &budget)
        .await
        .expect("the VM's budget is created");
    let source_pod = format!("virt-launcher-{name}-src");
    let pods: Api<Pod> = Api::namespaced(client, &namespace);
    pods.create(
        &PostParams::default(),
        &launcher_pod(&namespace, &source_pod, name, &uid, &node),
    )
    .await
    .expect("the launcher pod is created");
    Vm {
        name: name.to_string(),
        uid,
        source_pod,
    }
}

/// What the emulated KubeVirt did.
#[derive(Debug, Default)]
pub struct KubeVirtLog {
    /// Eviction requests the webhook saw, by pod.
    pub requests: BTreeMap<String, u32>,
    /// Migrations started, by VM.
    pub migrations: BTreeMap<String, u32>,
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
    *log.lock()
        .unwrap_or_else(|e| e.into_inner())
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
async fn set_budget(client: &kube::Client, namespace: &str, vm: &str, min_available: i32) {
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), namespace);
    let patch = json!({"spec": {"minAvailable": min_available}});
    budgets
        .patch(
            &budget_name(vm),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .expect("the VM's budget is patched");
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// One live migration of `vm` to `target`, as KubeVirt's migration controller does it.
async fn migrate(client: kube::Client, namespace: String, vm: Vm, target: String) {
    let api = vmis(&client, &namespace);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let Ok(vmi) = api.get(&vm.name).await else {
        return;
    };
    let source_node = vmi.data["status"]["nodeName"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    set_budget(&client, &namespace, &vm.name, 2).await;
    let target_pod = format!("virt-launcher-{}-dst", vm.name);
    pods.create(
        &PostParams::default(),
        &launcher_pod(&namespace, &target_pod, &vm.name, &vm.uid, &target),
    )
    .await
    .expect("the target pod is created");
    let started = json!({"status": {"migrationState": {
        "sourceNode": source_node, "targetNode": target, "targetPod": target_pod,
        "startTimestamp": now(), "completed": false, "failed": false
    }}});
    let _ = api
        .patch_status(&vm.name, &PatchParams::default(), &Patch::Merge(&started))
        .await;
    tokio::time::sleep(MIGRATION_TIME).await;
    // (A loop, not `eventually`: this runs in a task of its own, which must be Send.)
    for _ in 0..200 {
        if pods
            .get_opt(&target_pod)
            .await
            .ok()
            .flatten()
            .is_some_and(|p| ready(&p))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The source's virt-launcher exits once the VM runs on the target.
    let finished = json!({"status": {"phase": "Succeeded", "conditions": [
        {"type": "Ready", "status": "False", "reason": "PodCompleted"}
    ]}});
    pods.patch_status(
        &vm.source_pod,
        &PatchParams::default(),
        &Patch::Merge(&finished),
    )
    .await
    .expect("the source pod finishes");
    let done = json!({"status": {
        "nodeName": target, "evacuationNodeName": null,
        "migrationState": {"sourceNode": source_node, "targetNode": target,
                           "targetPod": target_pod, "startTimestamp": vmi.data["status"]["migrationState"]["startTimestamp"].clone(),
                           "endTimestamp": now(), "completed": true, "failed": false}
    }});
    let _ = api
        .patch_status(&vm.name, &PatchParams::default(), &Patch::Merge(&done))
        .await;
    let label = json!({"metadata": {"labels": {"kubevirt.io/nodeName": target}}});
    let _ = api
        .patch(&vm.name, &PatchParams::default(), &Patch::Merge(&label))
        .await;
    set_budget(&client, &namespace, &vm.name, 1).await;
}

/// KubeVirt's migration controller: migrates each VM marked for evacuation, once per mark.
fn migration_controller(
    client: kube::Client,
    namespace: String,
    vms: Vec<Vm>,
    target: String,
    log: Arc<Mutex<KubeVirtLog>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let migrating: Arc<Mutex<HashSet<String>>> = Arc::default();
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            for vm in &vms {
                let Ok(vmi) = vmis(&client, &namespace).get(&vm.name).await else {
                    continue;
                };
                let marked = !vmi.data["status"]["evacuationNodeName"].is_null();
                if !marked
                    || !migrating
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(vm.name.clone())
                {
                    continue;
                }
                *log.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .migrations
                    .entry(vm.name.clone())
                    .or_default() += 1;
                let (client, namespace, vm, target, migrating) = (
                    client.clone(),
                    namespace.clone(),
                    vm.clone(),
                    target.clone(),
                    migrating.clone(),
                );
                tokio::spawn(async move {
                    let name = vm.name.clone();
                    migrate(client, namespace, vm, target).await;
                    migrating
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&name);
                });
            }
        }
    })
}

/// A NodeMaintenance over two live-migratable VMs and an ordinary pod: each VM migrates exactly
/// once, no launcher pod is deleted while it runs, its budget is never overdrawn, and the
/// maintenance succeeds.
async fn two_vms_live_migrate_once_each_and_the_drain_succeeds(backend: Backend) {
    let mut env = TestEnv::on(backend)
        .scenario(Scenario::plain(2, 0).pdb(None))
        .namespace("vms")
        .namespace("apps")
        .pod("apps", "plain-0", "node-0", "plain")
        .start()
        .await;
    let client = env.admin_client();
    ensure_vmi_crd(&client).await;
    let namespace = env.ns("vms");
    let vms = vec![
        create_vm(&env, "vms", "vm-a", "node-0", "LiveMigrate", true).await,
        create_vm(&env, "vms", "vm-b", "node-0", "LiveMigrate", true).await,
    ];
    let log = Arc::new(Mutex::new(KubeVirtLog::default()));
    let (hook_client, hook_log) = (client.clone(), log.clone());
    let webhook = WebhookServer::start(move |eviction| {
        review(hook_client.clone(), hook_log.clone(), eviction)
    })
    .await;
    webhook.register(&client, CONFIGURATION, WEBHOOK).await;
    let launchers = PodWatch::start(&client, &namespace, "kubevirt.io=virt-launcher");
    let controller = migration_controller(
        client.clone(),
        namespace.clone(),
        vms.clone(),
        env.name("node-1"),
        log.clone(),
    );

    env.create_maintenance("nm-0", "node-0").await;
    eventually(
        "nm-0 to be Succeeded",
        Duration::from_secs(60),
        async || env.phase("nm-0").await.as_deref() == Some("Succeeded"),
    )
    .await;

    controller.abort();
    let (requests, migrations) = {
        let log = log.lock().unwrap_or_else(|e| e.into_inner());
        (log.requests.clone(), log.migrations.clone())
    };
    let once: BTreeMap<String, u32> = vms.iter().map(|vm| (vm.name.clone(), 1)).collect();
    assert_eq!(migrations, once, "each VM migrated exactly once");
    for vm in &vms {
        let asked = requests.get(&vm.source_pod).copied().unwrap_or(0);
        assert!(asked >= 1, "{} was asked: {requests:?}", vm.source_pod);
        let vmi = vmis(&client, &namespace)
            .get(&vm.name)
            .await
            .expect("the VMI");
        assert_eq!(
            vmi.data["status"]["nodeName"],
            env.name("node-1"),
            "{vm:?} moved"
        );
    }
    let deleted = launchers.deleted_while_running(&HashSet::new());
    assert!(
        deleted.is_empty(),
        "launcher pods deleted while they ran: {deleted:?}"
    );
    assert!(
        !env.pod_exists("apps", "plain-0").await,
        "the ordinary pod was evicted"
    );
    eprintln!("eviction requests per launcher pod: {requests:?}");
    env.stop_operator().await.expect("clean stop");
    unregister(&client, CONFIGURATION).await;
    drop(webhook);
}

/// A VM that must live-migrate (`evictionStrategy: LiveMigrate`) and cannot: KubeVirt's
/// webhook refuses its eviction with a 429, and the drain names the VM and KubeVirt's reason
/// as a blocker that needs a person, deleting nothing.
async fn a_vm_that_cannot_migrate_is_a_blocker_naming_kubevirts_reason(backend: Backend) {
    let mut env = TestEnv::on(backend)
        .scenario(Scenario::plain(2, 0).pdb(None))
        .namespace("vms")
        .start()
        .await;
    let client = env.admin_client();
    ensure_vmi_crd(&client).await;
    let namespace = env.ns("vms");
    let vm = create_vm(&env, "vms", "vm-pinned", "node-0", "LiveMigrate", false).await;
    let log = Arc::new(Mutex::new(KubeVirtLog::default()));
    let (hook_client, hook_log) = (client.clone(), log.clone());
    let webhook = WebhookServer::start(move |eviction| {
        review(hook_client.clone(), hook_log.clone(), eviction)
    })
    .await;
    webhook.register(&client, CONFIGURATION, WEBHOOK).await;

    env.create_maintenance("nm-0", "node-0").await;
    eventually(
        "the drain to say VmCannotMigrate",
        Duration::from_secs(30),
        async || env.condition("nm-0", "DrainBlocked").await["reason"] == "VmCannotMigrate",
    )
    .await;
    let blocked = env.condition("nm-0", "DrainBlocked").await;
    let message = blocked["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("VM {namespace}/vm-pinned cannot live-migrate"))
            && message.contains("DisksNotLiveMigratable"),
        "{blocked}"
    );
    eventually("a Warning event", Duration::from_secs(10), async || {
        env.events().await.iter().any(|e| {
            e["reason"] == "DrainBlocked"
                && e["type"] == "Warning"
                && e["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("cannot live-migrate"))
        })
    })
    .await;
    assert!(
        env.pod_exists("vms", &vm.source_pod).await,
        "nothing deleted"
    );
    assert_eq!(env.phase("nm-0").await.as_deref(), Some("Running"));
    let asked = log
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .requests
        .clone();
    assert!(
        asked.get(&vm.source_pod).is_some_and(|n| *n >= 1),
        "{asked:?}"
    );
    env.stop_operator().await.expect("clean stop");
    unregister(&client, CONFIGURATION).await;
    drop(webhook);
}

both_backends!(
    two_vms_live_migrate_once_each_and_the_drain_succeeds,
    a_vm_that_cannot_migrate_is_a_blocker_naming_kubevirts_reason
);

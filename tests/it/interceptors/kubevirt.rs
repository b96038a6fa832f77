//! KubeVirt live migration behind nmo's drain, with `nmo_sim::emulation::kubevirt`: KubeVirt
//! as kubevirt/kubevirt's docs/handling-eviction-requests.md documents it (virt-api's webhook
//! marks a LiveMigrate VM for evacuation and approves; the budget KubeVirt keeps over the
//! launcher pod answers 429; the migration controller widens the budget, starts the target pod
//! on another node, narrows the budget and finishes the source pod).

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::ListParams;
use nmo_sim::emulation::kubevirt::{self, KubeVirt, MigrationOptions, Vm};
use nmo_sim::emulation::pods::PodWatch;

use super::{assert_plain_pod_evicted, two_nodes_and_a_plain_pod};
use crate::support::{Backend, Phase, TestEnv, both_backends, eventually};

/// Migrations to `target`, two seconds each once the target pod runs.
pub(super) fn to(target: String) -> MigrationOptions {
    MigrationOptions {
        targets: vec![target],
        migration_time: Duration::from_secs(2),
        parallel: 5,
        per_node: 2,
    }
}

/// Installs the VMI CRD and creates a VM with `evictionStrategy: LiveMigrate` on node-0 in
/// namespace "vms" for each `(name, live_migratable)`; returns the admin client, the namespace
/// as the cluster names it, and the VMs.
pub(super) async fn vms_on_node_0(
    env: &TestEnv,
    vms: &[(&str, bool)],
) -> (kube::Client, String, Vec<Vm>) {
    let client = env.admin_client();
    kubevirt::install_vmi_crd(&client)
        .await
        .expect("the VMI CRD");
    let (namespace, node) = (env.ns("vms"), env.name("node-0"));
    let mut created = Vec::new();
    for (name, migratable) in vms {
        let vm = kubevirt::create_vm(&client, &namespace, name, &node, "LiveMigrate", *migratable)
            .await
            .expect("a VM");
        created.push(vm);
    }
    (client, namespace, created)
}

/// Waits until the `count` budgets KubeVirt keeps over the launcher pods in namespace "vms"
/// are counted by the disruption controller: each over one healthy pod, allowing no
/// disruption. This is what the budget-driven drain reads as "never send": the state in which
/// a drain that only follows budgets never asks a VM to migrate.
pub(super) async fn budgets_settled(env: &TestEnv, count: usize) {
    eventually(
        "the VMs' budgets counted, allowing no disruption",
        Duration::from_secs(30),
        async || {
            let budgets = env
                .list_json::<PodDisruptionBudget>(Some("vms"), &ListParams::default())
                .await;
            budgets.len() == count
                && budgets.iter().all(|b| {
                    let status = &b["status"];
                    status["observedGeneration"] == b["metadata"]["generation"]
                        && status["expectedPods"] == 1
                        && status["currentHealthy"] == 1
                        && status["disruptionsAllowed"] == 0
                })
        },
    )
    .await;
}

/// A NodeMaintenance over two live-migratable VMs and an ordinary pod: each VM migrates exactly
/// once, no launcher pod is deleted while it runs (so its budget is never overdrawn: each VM's
/// one launcher pod is the budget's one pod), and the maintenance succeeds. Meanwhile the drain
/// says, in KubeVirt's words, that the VMs live-migrate and where to. nmo runs with
/// deploy/base/rbac.yaml's rights, and reads the VMIs with them.
async fn two_vms_live_migrate_once_each_and_the_drain_succeeds(backend: Backend) {
    let mut env = two_nodes_and_a_plain_pod(backend, "vms")
        .deployed_rbac()
        .start()
        .await;
    let (client, namespace, vms) = vms_on_node_0(&env, &[("vm-a", true), ("vm-b", true)]).await;
    // Migrations of 5 s: what the status says while they run is asserted below, and a busy
    // machine (the whole suite at once) may take a second or two to deliver a VMI's update.
    let migrations = MigrationOptions {
        migration_time: Duration::from_secs(5),
        ..to(env.name("node-1"))
    };
    let kubevirt = KubeVirt::start(&client, &namespace, migrations)
        .await
        .expect("the emulated KubeVirt starts");
    let launchers = PodWatch::start(&client, &namespace, "kubevirt.io=virt-launcher");
    budgets_settled(&env, vms.len()).await;

    env.create_maintenance("nm-0", "node-0").await;
    // What the status said meanwhile, in KubeVirt's words.
    let migrating = format!("is live-migrating to node {} since", env.name("node-1"));
    let said = std::cell::RefCell::new(Vec::<String>::new());
    eventually(
        "nm-0 to be Succeeded",
        Duration::from_secs(60),
        async || {
            let status = env.status("nm-0").await;
            for reason in status["pendingPodsReasons"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if reason["reason"] == "LiveMigrating" {
                    said.borrow_mut()
                        .push(reason["message"].as_str().unwrap_or_default().to_string());
                }
            }
            status["phase"] == "Succeeded"
        },
    )
    .await;
    let said = said.into_inner();
    assert!(
        said.iter().any(|m| m.contains(&migrating)),
        "the status said the VMs live-migrate: {said:?}"
    );

    let log = kubevirt.log();
    let once: BTreeMap<String, u32> = vms.iter().map(|vm| (vm.name.clone(), 1)).collect();
    assert_eq!(log.migrations, once, "each VM migrated exactly once");
    for vm in &vms {
        let asked = log.requests.get(&vm.source_pod).copied().unwrap_or(0);
        assert!(
            asked >= 1,
            "{} was asked: {:?}",
            vm.source_pod,
            log.requests
        );
        let vmi = kubevirt::vmis(&client, &namespace)
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
    assert_plain_pod_evicted(&env).await;
    let events = env.event_messages("nm-0", "DrainBlocked").await;
    assert!(
        events.iter().any(|m| m.contains("(LiveMigrating)")),
        "an event said so once: {events:?}"
    );
    eprintln!("eviction requests per launcher pod: {:?}", log.requests);
    env.stop_cleanly().await;
    let denied = env.operator_refusals();
    assert!(denied.is_empty(), "nmo was refused: {denied:?}");
    let watched_vms = env
        .operator_requests()
        .into_iter()
        .any(|(group, resource, verb)| {
            (group, resource.as_str(), verb.as_str())
                == ("kubevirt.io".into(), "virtualmachineinstances", "watch")
        });
    assert!(watched_vms, "nmo watched the VMIs");
    kubevirt.stop().await;
}

/// A VM that must live-migrate (`evictionStrategy: LiveMigrate`) and cannot: KubeVirt's
/// webhook refuses its eviction with a 429, and the drain names the VM and KubeVirt's reason
/// as a blocker that needs a person, deleting nothing.
async fn a_vm_that_cannot_migrate_is_a_blocker_naming_kubevirts_reason(backend: Backend) {
    let mut env = TestEnv::on(backend)
        .nodes(2, 0)
        .namespace("vms")
        .start()
        .await;
    let (client, namespace, vms) = vms_on_node_0(&env, &[("vm-pinned", false)]).await;
    let vm = &vms[0];
    let kubevirt = KubeVirt::start(&client, &namespace, to(env.name("node-1")))
        .await
        .expect("the emulated KubeVirt starts");
    budgets_settled(&env, 1).await;

    env.create_maintenance("nm-0", "node-0").await;
    env.wait_drain_blocked("nm-0", "VmCannotMigrate", Duration::from_secs(30))
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
    assert_eq!(env.phase("nm-0").await, Some(Phase::Running));
    let asked = kubevirt.log().requests;
    assert!(
        asked.get(&vm.source_pod).is_some_and(|n| *n >= 1),
        "{asked:?}"
    );
    assert!(kubevirt.log().migrations.is_empty(), "nothing migrated");
    env.stop_cleanly().await;
    kubevirt.stop().await;
}

both_backends!(
    two_vms_live_migrate_once_each_and_the_drain_succeeds,
    a_vm_that_cannot_migrate_is_a_blocker_naming_kubevirts_reason
);

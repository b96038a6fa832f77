//! `nmo plan` on nodes with workloads that act on eviction requests: per pod, which admission
//! webhook will see its eviction, and for a KubeVirt VM whether it live-migrates or cannot
//! (its eviction strategy and KubeVirt's LiveMigratable condition), with the VM that cannot as
//! a predicted blocker; a launcher pod's own budget (KubeVirt's, never allowing a disruption)
//! is not predicted as a structural blocker, since KubeVirt acts on the eviction.

use std::time::Duration;

use nmo::plan::{PlanRequest, plan};
use nmo_sim::emulation::kubevirt::{self, KubeVirt, MigrationOptions};

use super::kubevirt::{to, vms_on_node_0};
use super::two_nodes_and_a_plain_pod;
use crate::support::{Backend, both_backends};

async fn the_plan_says_who_sees_each_eviction_and_what_each_vm_does(backend: Backend) {
    let env = two_nodes_and_a_plain_pod(backend, "vms").start_idle().await;
    let (client, namespace, vms) = vms_on_node_0(&env, &[("vm-a", true), ("vm-b", false)]).await;
    let (mobile, pinned) = (&vms[0], &vms[1]);
    let node = env.name("node-0");
    let options = MigrationOptions {
        migration_time: Duration::from_secs(1),
        ..to(env.name("node-1"))
    };
    let kubevirt = KubeVirt::start(&client, &namespace, options)
        .await
        .expect("the emulated KubeVirt");
    super::kubevirt::budgets_settled(&env, 2).await;

    let request = PlanRequest {
        nodes: vec![node.clone()],
        selector: None,
    };
    let planned = plan(&client, &request).await.expect("a plan");
    let pods = &planned.nodes[0].pods;
    let pod = |name: &str| {
        pods.iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("{name} in {pods:?}"))
    };
    let a = pod(&mobile.source_pod);
    assert_eq!(a.interceptors, [kubevirt::WEBHOOK]);
    let vm = a.vm.as_ref().expect("its VM");
    assert_eq!(vm.outcome, "live-migrates to another node");
    assert_eq!(vm.eviction_strategy.as_deref(), Some("LiveMigrate"));
    assert_eq!(vm.migratable.as_deref(), Some("True"));
    let b = pod(&pinned.source_pod);
    assert!(
        b.vm.as_ref()
            .is_some_and(|vm| vm.outcome.starts_with("cannot migrate")),
        "{b:?}"
    );
    assert!(
        pod("plain-0").interceptors.is_empty(),
        "KubeVirt's webhook approves every other pod's eviction: its budget alone decides"
    );
    let blockers: Vec<String> = planned.blockers.iter().map(ToString::to_string).collect();
    assert_eq!(blockers.len(), 1, "{blockers:?}");
    assert!(
        blockers[0].contains(&format!("VM {namespace}/vm-b must live-migrate"))
            && blockers[0].contains("DisksNotLiveMigratable"),
        "{blockers:?}"
    );
    let text = nmo::plan::render_text(&planned);
    assert!(
        text.contains(&format!(
            "its eviction is seen by {}; VM {namespace}/vm-a: live-migrates to another node",
            kubevirt::WEBHOOK
        )),
        "{text}"
    );
    kubevirt.stop().await;
}

both_backends!(the_plan_says_who_sees_each_eviction_and_what_each_vm_does);

//! Pods that something intercepts (an admission webhook on `pods/eviction`, or KubeVirt for a
//! launcher pod) are asked when their drain starts whatever their budget says, and asked
//! again with backoff from 5 s up to every 30 s until they leave; elsewhere budgets pace the
//! asking as before. Follows KubeVirt's docs/handling-eviction-requests.md (the launcher pod's
//! budget never allows a disruption; the VM migrates in the background and its source pod
//! finishes) and Strimzi Drain Cleaner's README (its webhook refuses, with a 500, and the
//! operator rolls the broker).

use super::pdbs::{condition, web_cluster_with, web_pdb};
use super::*;
use crate::pdb::{IntOrPercent, LabelSelector, Pdb, PdbStatus};

/// KubeVirt's budget over one launcher pod: `minAvailable: 1` of one pod, never a disruption.
fn launcher_budget(vm: &str) -> Pdb {
    Pdb {
        namespace: "vms".into(),
        name: format!("kubevirt-disruption-budget-{vm}"),
        generation: 1,
        selector: Some(LabelSelector::labels([("kubevirt.io/created-by", vm)])),
        min_available: Some(IntOrPercent::Int(1)),
        max_unavailable: None,
        always_allow_unhealthy: false,
        status: Some(PdbStatus {
            observed_generation: 1,
            disruptions_allowed: 0,
            current_healthy: 1,
            desired_healthy: 1,
            expected_pods: 1,
            ..PdbStatus::default()
        }),
    }
}

fn launcher_pod(vm: &str) -> PodInfo {
    let mut pod = PodInfo::test("vms", &format!("virt-launcher-{vm}"))
        .labelled("kubevirt.io", "virt-launcher")
        .labelled("kubevirt.io/created-by", vm);
    pod.controller = Some(crate::model::OwnerRef {
        kind: "VirtualMachineInstance".into(),
        name: vm.into(),
        uid: format!("{vm}-uid").into(),
    });
    pod
}

#[tokio::test(start_paused = true)]
async fn a_launcher_pod_is_asked_at_once_and_again_with_backoff_until_it_leaves() {
    let cluster = FakeCluster::new();
    cluster.add_node("n1");
    cluster.add_pod_info("n1", launcher_pod("vm-a"));
    cluster.put_watched_pdb(launcher_budget("vm-a"));
    let h = Scenario::on(&cluster).nm1().start().await;
    assert!(
        h.wait_calls("evict_pod", |n| n == 1, Duration::from_secs(2))
            .await,
        "asked at once although its budget allows nothing"
    );
    tokio::time::sleep(Duration::from_secs(58)).await;
    // Asked at 0 s, then after 4-5 s, 8-10 s and 16-20 s: at 0, ~5, ~15 and ~35 s (and ~52
    // s at the shortest jitter), never every 5 s.
    let calls = cluster.count_calls("evict_pod");
    assert!((4..=5).contains(&calls), "{calls} requests in 60 s");
    let status = cluster.status("nm1");
    let reason = &status.pending_pods_reasons[0];
    assert_eq!(reason.reason, "EvictionIntercepted", "{status:?}");
    assert!(reason.message.contains("KubeVirt"), "{reason:?}");
    let blocked = condition(&cluster, "nm1", conditions::DRAIN_BLOCKED).expect("DrainBlocked");
    assert_eq!(blocked.reason, "EvictionIntercepted");
    // Never slower than every 30 s.
    tokio::time::sleep(Duration::from_secs(120)).await;
    let later = cluster.count_calls("evict_pod");
    assert!(
        later >= calls + 4,
        "{later} after {calls}: at least every 30 s"
    );

    // The VM migrated: its source pod finished and is gone.
    cluster.remove_pod("vms", "virt-launcher-vm-a");
    assert!(h.wait_succeeded("nm1", Duration::from_secs(10)).await);
    let stats = h.eviction_stats().await;
    assert_eq!((stats.held, stats.reasks), (0, 0), "{stats:?}");
    h.stop().await;
}

/// Strimzi's Drain Cleaner: a webhook on `pods/eviction` annotates the broker and refuses with
/// a 500; the broker's budget (`minAvailable: 2` over two brokers) allows nothing. The broker
/// is asked at once, the refusal is no failure, and its words stay in the pod's reason.
#[tokio::test(start_paused = true)]
async fn a_webhook_refusal_of_any_code_is_asked_again_and_keeps_its_words() {
    let cluster = web_cluster_with(&["n1"], 1, web_pdb(0));
    cluster.set_eviction_webhooks(&["strimzi-drain-cleaner.strimzi.io"]);
    let refusal = "admission webhook \"strimzi-drain-cleaner.strimzi.io\" denied the request: \
                   The pod will be rolled by the Strimzi Cluster Operator";
    cluster.script_evictions(
        "app",
        "n1-web-0",
        vec![
            EvictionOutcome::DeniedByWebhook {
                webhook: "strimzi-drain-cleaner.strimzi.io".into(),
                message: refusal.into(),
                code: 500,
            };
            3
        ],
    );
    let h = Scenario::on(&cluster).nm1().start().await;
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(
        cluster.count_calls("evict_pod"),
        2,
        "at once, then after ~5 s"
    );
    let status = cluster.status("nm1");
    assert_eq!(status.phase, Some(Phase::Running));
    let reason = &status.pending_pods_reasons[0];
    assert_eq!(reason.reason, "EvictionIntercepted");
    assert!(
        reason
            .message
            .contains("rolled by the Strimzi Cluster Operator"),
        "{reason:?}"
    );
    assert!(
        status
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("strimzi-drain-cleaner.strimzi.io")),
        "{status:?}"
    );
    // The operator rolled the broker onto another node.
    cluster.remove_pod("app", "n1-web-0");
    assert!(h.wait_succeeded("nm1", Duration::from_secs(10)).await);
    assert_eq!(h.eviction_stats().await.intercepted, 2);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_webhook_registered_during_a_drain_gets_the_waiting_pods_asked() {
    let cluster = web_cluster_with(&["n1"], 2, web_pdb(0));
    let h = Scenario::on(&cluster).nm1().start().await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        cluster.count_calls("evict_pod"),
        0,
        "nothing intercepts: the budget paces"
    );
    cluster.set_eviction_webhooks(&["drain-helper.example.com"]);
    assert!(
        h.wait_calls("evict_pod", |n| n == 2, Duration::from_secs(1))
            .await,
        "both asked at once"
    );
    // And the budget still releases them the moment it allows.
    cluster.set_watched_pdb_allowed("app", "web", 2);
    assert!(
        h.wait_succeeded("nm1", Duration::from_secs(2)).await,
        "{:?}",
        cluster.calls()
    );
    h.stop().await;
}

fn vm(name: &str) -> crate::model::VmInfo {
    crate::model::VmInfo {
        namespace: "vms".into(),
        name: name.into(),
        eviction_strategy: Some("LiveMigrate".into()),
        node: Some("n1".into()),
        ..Default::default()
    }
}

/// KubeVirt's words, from the VMI: the launcher pod's VM is live-migrating (target, since
/// when), which is progress, not an obstacle; a VM that cannot migrate is a blocker naming it
/// and KubeVirt's reason.
#[tokio::test(start_paused = true)]
async fn a_launcher_pod_says_what_its_vm_does() {
    let cluster = FakeCluster::new();
    cluster.add_node("n1");
    cluster.add_pod_info("n1", launcher_pod("vm-a"));
    cluster.add_pod_info("n1", launcher_pod("vm-b"));
    cluster.put_watched_pdb(launcher_budget("vm-a"));
    cluster.put_watched_pdb(launcher_budget("vm-b"));
    let since = t0() + chrono::Duration::seconds(2);
    cluster.put_vm(crate::model::VmInfo {
        evacuation_node: Some("n1".into()),
        migration: Some(crate::model::VmMigration {
            target_node: Some("n2".into()),
            started: Some(since),
            ..Default::default()
        }),
        ..vm("vm-a")
    });
    cluster.put_vm(crate::model::VmInfo {
        migratable: Some(crate::model::VmCondition {
            status: "False".into(),
            reason: Some("DisksNotLiveMigratable".into()),
            message: Some("PVC rootdisk is not shared".into()),
        }),
        ..vm("vm-b")
    });
    let h = Scenario::on(&cluster).nm1().start().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        cluster.count_calls("watch_vms n1"),
        1,
        "{:?}",
        cluster.calls()
    );
    let status = cluster.status("nm1");
    let reason_of = |name: &str| {
        status
            .pending_pods_reasons
            .iter()
            .find(|r| &*r.name == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} in {status:?}"))
    };
    let migrating = reason_of("virt-launcher-vm-a");
    assert_eq!(migrating.reason, "LiveMigrating");
    assert!(
        migrating
            .message
            .starts_with("VM vms/vm-a is live-migrating to node n2 since"),
        "{migrating:?}"
    );
    let stuck = reason_of("virt-launcher-vm-b");
    assert_eq!(stuck.reason, "VmCannotMigrate");
    assert!(
        stuck.message.contains("DisksNotLiveMigratable"),
        "{stuck:?}"
    );
    let blocked = condition(&cluster, "nm1", conditions::DRAIN_BLOCKED).expect("DrainBlocked");
    assert_eq!(blocked.reason, "VmCannotMigrate", "the worst of the two");
    assert!(cluster.events().iter().any(|e| e.reason == "DrainBlocked"
        && e.type_ == EventType::Warning
        && e.message.contains("vm-b cannot live-migrate")));

    // vm-a's migration completes: its source pod finished and is gone; vm-b is stopped.
    cluster.remove_pod("vms", "virt-launcher-vm-a");
    cluster.remove_pod("vms", "virt-launcher-vm-b");
    assert!(h.wait_succeeded("nm1", Duration::from_secs(10)).await);
    h.stop().await;
}

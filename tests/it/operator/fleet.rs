//! The cluster maintenance budget end to end: NodeMaintenances beyond it wait touching
//! nothing, start by themselves when a slot frees or a node comes back, and the cap holds
//! across a crash and a leader change (the budget is derived from the cluster).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use nmo::operator::OperatorOptions;
use serde_json::{Value, json};

use crate::support::{Backend, TestEnv, both_backends, eventually, test_options};

/// The most of the test's nodes ever cordoned at once, from every node change the watch
/// reports (a real cluster may hold other nodes: only the test's count).
struct CordonMonitor {
    max: Arc<Mutex<usize>>,
    task: tokio::task::JoinHandle<()>,
}

impl CordonMonitor {
    async fn start(client: kube::Client, nodes: BTreeSet<String>) -> Self {
        let max = Arc::new(Mutex::new(0));
        let seen = max.clone();
        let (listed, ready) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut listed = Some(listed);
            let mut events =
                watcher::watcher(Api::<Node>::all(client), watcher::Config::default()).boxed();
            let mut cordoned = BTreeSet::new();
            let mut listing = BTreeSet::new();
            while let Some(event) = events.next().await {
                let cordon = |node: &Node| {
                    node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
                        && node
                            .metadata
                            .name
                            .as_ref()
                            .is_some_and(|n| nodes.contains(n))
                };
                let name = |node: &Node| node.metadata.name.clone().unwrap_or_default();
                match event {
                    Ok(Event::Init) => listing.clear(),
                    Ok(Event::InitApply(node)) => {
                        if cordon(&node) {
                            listing.insert(name(&node));
                        }
                    }
                    Ok(Event::InitDone) => {
                        cordoned = std::mem::take(&mut listing);
                        if let Some(listed) = listed.take() {
                            let _ = listed.send(());
                        }
                    }
                    Ok(Event::Apply(node)) if cordon(&node) => {
                        cordoned.insert(name(&node));
                    }
                    Ok(Event::Apply(node)) | Ok(Event::Delete(node)) => {
                        cordoned.remove(&name(&node));
                    }
                    Err(_) => {}
                }
                let mut max = seen.lock().unwrap();
                *max = (*max).max(cordoned.len());
            }
        });
        ready.await.expect("the node watch lists");
        CordonMonitor { max, task }
    }

    fn max(&self) -> usize {
        *self.max.lock().unwrap()
    }
}

impl Drop for CordonMonitor {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn budget(parallel: Option<&str>, unavailable: Option<&str>) -> OperatorOptions {
    OperatorOptions {
        max_parallel_maintenances: parallel.map(str::to_string),
        max_unavailable_nodes: unavailable.map(str::to_string),
        ..test_options()
    }
}

fn elected(options: OperatorOptions) -> OperatorOptions {
    OperatorOptions {
        leader_elect: true,
        leader_elect_lease_duration: Duration::from_secs(3),
        leader_elect_renew_deadline: Duration::from_secs(2),
        leader_elect_retry_period: Duration::from_millis(300),
        ..options
    }
}

fn has_finalizer(nm: &Value) -> bool {
    nm["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|list| list.iter().any(|f| f == "foregroundDeleteNodeMaintenance"))
}

impl TestEnv {
    /// Waiting in the queue at `position`: Running, Queued, no finalizer.
    async fn is_queued_at(&self, name: &str, position: i64) -> bool {
        let Some(nm) = self.maintenance(name).await else {
            return false;
        };
        let queued = nm["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Queued" && c["status"] == "True");
        queued
            && nm["status"]["phase"] == "Running"
            && nm["status"]["queue"]["position"] == position
            && !has_finalizer(&nm)
    }

    async fn started(&self, name: &str) -> bool {
        self.maintenance(name)
            .await
            .is_some_and(|nm| has_finalizer(&nm))
    }

    async fn set_node_ready(&self, node: &str, ready: bool) {
        let status = if ready { "True" } else { "False" };
        self.patch_node_status(
            node,
            json!({"conditions": [{"type": "Ready", "status": status}]}),
        )
        .await;
    }
}

async fn the_queue_moves_by_itself_and_the_cap_holds_across_a_crash_and_a_leader_change(
    backend: Backend,
) {
    let options = elected(budget(Some("2"), None));
    let mut env = TestEnv::on(backend)
        .nodes(6, 2)
        .operator_options(options.clone())
        .start()
        .await;
    let nodes = (0..6).map(|i| env.name(&format!("node-{i}"))).collect();
    let monitor = CordonMonitor::start(env.admin_client(), nodes).await;
    // z-0 and z-1 first, a second before the others (creation times count in seconds); the
    // waiting ones' names sort first, so a new process lists them before the running ones.
    env.create_maintenance("z-0", "node-0").await;
    env.create_maintenance("z-1", "node-1").await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    for i in 2..6 {
        env.create_maintenance(&format!("nm-{i}"), &format!("node-{i}"))
            .await;
    }
    env.wait_succeeded("z-0").await;
    env.wait_succeeded("z-1").await;
    for (i, position) in [(2, 1), (3, 2), (4, 3), (5, 4)] {
        let name = format!("nm-{i}");
        eventually(
            &format!("{name} queued at {position}"),
            Duration::from_secs(10),
            async || env.is_queued_at(&name, position).await,
        )
        .await;
        let node = env.node(&format!("node-{i}")).await;
        assert!(
            node["spec"]["unschedulable"].is_null(),
            "a waiting maintenance touches nothing"
        );
        assert!(env.lease(&format!("node-{i}")).await.is_none());
    }
    let status = env.status("nm-2").await;
    assert_eq!(
        status["queue"]["waitingFor"],
        "max-parallel-maintenances: 2 of 2 running"
    );
    assert!(
        env.event_reasons("nm-2")
            .await
            .contains(&"QueuedMaintenance".to_string())
    );

    // A crash: the new process counts z-0 and z-1 (their finalizers) and starts nobody.
    env.kill_operator().await;
    env.start_operator();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(env.is_queued_at("nm-2", 1).await);

    // Deleting a Succeeded one frees its slot: the first in line starts by itself.
    env.delete_maintenance("z-0").await;
    eventually("nm-2 to start", Duration::from_secs(5), async || {
        env.started("nm-2").await
    })
    .await;
    env.wait_succeeded("nm-2").await;
    assert!(
        env.status("nm-2").await["queue"].is_null(),
        "out of the queue"
    );

    // A leader change: the standby derives the same queue and moves it.
    let standby = env.start_another_operator(options.clone());
    env.kill_operator().await;
    env.end_maintenance("z-1").await;
    eventually("nm-3 to start", Duration::from_secs(10), async || {
        env.started("nm-3").await
    })
    .await;
    env.wait_succeeded("nm-3").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!env.started("nm-4").await && !env.started("nm-5").await);
    assert_eq!(monitor.max(), 2, "never more than 2 nodes out at once");
    drop(standby);
}
both_backends!(the_queue_moves_by_itself_and_the_cap_holds_across_a_crash_and_a_leader_change);

async fn a_maintenance_waits_for_an_unavailable_node_to_come_back(backend: Backend) {
    let env = TestEnv::on(backend)
        .nodes(5, 2)
        .operator_options(budget(None, Some("2")))
        .start()
        .await;
    env.set_node_ready("node-4", false).await;
    env.maintain("nm-0", "node-0").await;
    env.create_maintenance("nm-1", "node-1").await;
    eventually("nm-1 queued", Duration::from_secs(10), async || {
        env.is_queued_at("nm-1", 1).await
    })
    .await;
    assert_eq!(
        env.status("nm-1").await["queue"]["waitingFor"],
        "max-unavailable-nodes: 2 of 2 unavailable"
    );
    // A maintenance for the NotReady node is counted once, but waits its turn behind nm-1.
    env.create_maintenance("nm-4", "node-4").await;
    eventually("nm-4 queued", Duration::from_secs(10), async || {
        env.is_queued_at("nm-4", 2).await
    })
    .await;
    env.set_node_ready("node-4", true).await;
    eventually("nm-1 to start", Duration::from_secs(5), async || {
        env.started("nm-1").await
    })
    .await;
    env.wait_succeeded("nm-1").await;
    // node-0 and node-1 are out: node-4's maintenance would make it 3.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!env.started("nm-4").await);
    env.delete_maintenance("nm-0").await;
    env.wait_succeeded("nm-4").await;
}
both_backends!(a_maintenance_waits_for_an_unavailable_node_to_come_back);

#[test]
fn a_budget_of_zero_is_refused_before_anything_starts() {
    for (flag, value, refusal) in [
        (
            "--max-parallel-maintenances",
            "0",
            "--max-parallel-maintenances: `0` would never let a maintenance start",
        ),
        (
            "--max-unavailable-nodes",
            "10 percent",
            "--max-unavailable-nodes: `10 percent` is neither a number",
        ),
    ] {
        // No cluster to reach: the flag is refused before nmo looks for one.
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_nmo"))
            .args(["run", flag, value])
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .output()
            .expect("nmo runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(refusal), "{stderr}");
    }
}

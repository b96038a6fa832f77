//! The cluster maintenance budget: NodeMaintenances beyond it wait touching nothing, oldest
//! first, start by themselves when a slot frees, and the cap holds under churn and across a
//! restart of the actors.

use std::collections::BTreeSet;

use futures::StreamExt;
use tokio::task::JoinHandle;

use super::*;
use crate::config::Config;
use crate::fleet::{FleetBudget, Limit};
use crate::model::NodeSummaryEvent;
use crate::ports::Cluster;

fn parallel(n: u32) -> impl FnOnce(&mut Config) {
    move |config: &mut Config| {
        config.fleet = FleetBudget {
            max_parallel: Some(Limit::Count(n)),
            max_unavailable: None,
        };
    }
}

/// `n` nodes `n0..`, each with one pod.
fn nodes(n: usize) -> FakeCluster {
    let cluster = FakeCluster::new();
    for i in 0..n {
        let node = format!("n{i}");
        cluster.add_node(&node);
        cluster.add_pod(&node, "app", &format!("{node}-p0"));
    }
    cluster
}

fn at(secs: i64) -> chrono::DateTime<chrono::Utc> {
    t0() + chrono::Duration::seconds(secs)
}

/// The most nodes ever cordoned at once, seen through every node change (the fake reports
/// each one), from the moment it is started.
struct CordonMonitor {
    max: Arc<std::sync::Mutex<usize>>,
    task: JoinHandle<()>,
}

impl CordonMonitor {
    fn start(cluster: &FakeCluster) -> Self {
        let max = Arc::new(std::sync::Mutex::new(0));
        let mut events = cluster.watch_node_summaries();
        let seen = max.clone();
        let task = tokio::spawn(async move {
            let mut cordoned = BTreeSet::new();
            while let Some(event) = events.next().await {
                match event {
                    NodeSummaryEvent::Listed(all) => {
                        cordoned = all
                            .into_iter()
                            .filter(|n| n.unschedulable)
                            .map(|n| n.name)
                            .collect();
                    }
                    NodeSummaryEvent::Changed(node) if node.unschedulable => {
                        cordoned.insert(node.name);
                    }
                    NodeSummaryEvent::Changed(node) => {
                        cordoned.remove(&node.name);
                    }
                    NodeSummaryEvent::Deleted(name) => {
                        cordoned.remove(&name);
                    }
                }
                let mut max = seen.lock().unwrap();
                *max = (*max).max(cordoned.len());
            }
        });
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

fn queued(cluster: &FakeCluster, name: &str) -> bool {
    plan::condition(&cluster.status(name), conditions::QUEUED).is_some_and(|c| c.status == "True")
}

/// Calls made about a NodeMaintenance or its node.
fn calls_about(cluster: &FakeCluster, nm: &str, node: &str) -> Vec<String> {
    cluster
        .calls()
        .into_iter()
        .filter(|c| {
            c.ends_with(&format!(" {nm}"))
                || c.ends_with(&format!(" {node}"))
                || c.ends_with(&format!("/node-{node}"))
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn beyond_the_budget_maintenances_wait_touching_nothing_and_start_when_a_slot_frees() {
    let cluster = nodes(4);
    let h = Harness::paused(&cluster, parallel(2)).await;
    for i in 0..4 {
        cluster.create_maintenance(&format!("nm-{i}"), &format!("n{i}"), at(i64::from(i)));
    }
    for name in ["nm-0", "nm-1"] {
        assert!(
            h.wait_phase(name, Phase::Succeeded, Duration::from_secs(30))
                .await
        );
    }
    assert!(
        eventually(Duration::from_secs(5), || queued(&cluster, "nm-2")
            && queued(&cluster, "nm-3"))
        .await
    );
    assert_eq!(h.queue().await, ["nm-2", "nm-3"]);
    for (name, node, position) in [("nm-2", "n2", 1), ("nm-3", "n3", 2)] {
        let nm = cluster.maintenance(name).unwrap();
        assert!(
            !nm.has_finalizer(),
            "a waiting maintenance has no finalizer"
        );
        let status = nm.status.unwrap();
        assert_eq!(status.phase, Some(Phase::Running));
        let place = status.queue.expect("its place in the queue");
        assert_eq!(place.position, position);
        assert_eq!(
            place.waiting_for,
            "max-parallel-maintenances: 2 of 2 running"
        );
        let n = cluster.node(node).unwrap();
        assert!(!n.unschedulable && n.taints.is_empty() && n.labels.is_empty());
        assert!(cluster.lease(NS, &format!("node-{node}")).is_none());
        // Nothing but its queue status write and its one event: no watch, no read.
        assert_eq!(
            calls_about(&cluster, name, node),
            [format!("write_status {name}")]
        );
    }
    let queued_events = cluster
        .events()
        .into_iter()
        .filter(|e| e.reason == "QueuedMaintenance")
        .count();
    assert_eq!(queued_events, 2, "one event each when queued");

    // Hours pass: still nothing more for the waiting ones (their place did not move).
    tokio::time::sleep(Duration::from_secs(3 * 3600)).await;
    assert_eq!(calls_about(&cluster, "nm-3", "n3"), ["write_status nm-3"]);

    // Succeeded keeps its slot; deleting it frees it, and the first in line starts at once.
    cluster.delete_maintenance("nm-0");
    assert!(h.wait_gone("nm-0", Duration::from_secs(10)).await);
    assert!(
        eventually(Duration::from_secs(1), || cluster
            .maintenance("nm-2")
            .unwrap()
            .has_finalizer())
        .await,
        "the next one starts within a second"
    );
    assert!(
        h.wait_phase("nm-2", Phase::Succeeded, Duration::from_secs(30))
            .await
    );
    let status = cluster.status("nm-2");
    assert_eq!(status.queue, None);
    let condition = plan::condition(&status, conditions::QUEUED).unwrap();
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "Started")
    );
    assert_eq!(status.total_pods, 1, "counts taken when it started");
    let about_nm2: Vec<String> = cluster
        .events()
        .into_iter()
        .filter(|e| matches!(&e.target, EventTarget::Maintenance { name, .. } if name == "nm-2"))
        .map(|e| e.reason)
        .collect();
    assert_eq!(
        about_nm2[..2],
        ["QueuedMaintenance", "BeginMaintenance"],
        "one event when queued, one when started"
    );
    assert_eq!(status.eviction_pods, 1);
    assert_eq!(h.queue().await, ["nm-3"]);
    assert!(queued(&cluster, "nm-3"));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_oldest_starts_first_whatever_the_names_or_the_order_seen() {
    let cluster = nodes(4);
    let h = Harness::paused(&cluster, parallel(1)).await;
    // Created (by creation time) c, then b, then a; d and e share a time: by name.
    cluster.create_maintenance("c", "n0", at(0));
    cluster.create_maintenance("a", "n1", at(20));
    cluster.create_maintenance("e", "n3", at(10));
    cluster.create_maintenance("d", "n2", at(10));
    let mut started = Vec::new();
    for _ in 0..4 {
        let next = async {
            loop {
                let running: Vec<String> = ["a", "c", "d", "e"]
                    .into_iter()
                    .filter(|n| !started.contains(&n.to_string()))
                    .filter(|n| cluster.maintenance(n).is_some_and(|nm| nm.has_finalizer()))
                    .map(str::to_string)
                    .collect();
                if let Some(name) = running.first() {
                    return name.clone();
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        let name = tokio::time::timeout(Duration::from_secs(30), next)
            .await
            .unwrap();
        assert!(
            h.wait_phase(&name, Phase::Succeeded, Duration::from_secs(30))
                .await
        );
        started.push(name.clone());
        cluster.delete_maintenance(&name);
        assert!(h.wait_gone(&name, Duration::from_secs(10)).await);
    }
    assert_eq!(started, ["c", "d", "e", "a"]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_cap_holds_under_concurrent_creates_and_deletes() {
    let cluster = nodes(12);
    let monitor = CordonMonitor::start(&cluster);
    let h = Harness::paused(&cluster, parallel(3)).await;
    let names: Vec<String> = (0..12).map(|i| format!("nm-{i}")).collect();
    // Creates and deletes interleaved: some are deleted while waiting, some while draining,
    // some once Succeeded; deleted ones are created again later.
    let churn = {
        let cluster = cluster.clone();
        let names = names.clone();
        tokio::spawn(async move {
            for round in 0..3_i64 {
                for (i, name) in names.iter().enumerate() {
                    if cluster.maintenance(name).is_none() {
                        let created = at(round * 100 + i64::try_from(i).unwrap());
                        cluster.create_maintenance(name, &format!("n{i}"), created);
                    }
                    if (i + usize::try_from(round).unwrap()) % 3 == 0 {
                        tokio::time::sleep(Duration::from_millis(7)).await;
                    }
                }
                for (i, name) in names.iter().enumerate() {
                    if (i * 7 + usize::try_from(round).unwrap()) % 4 == 0 {
                        cluster.delete_maintenance(name);
                    }
                    tokio::time::sleep(Duration::from_millis(3)).await;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    churn.await.unwrap();
    // Then everyone that is left is let through: delete each as it succeeds.
    let all_done = async {
        loop {
            let mut left = 0;
            for name in &names {
                match cluster.maintenance(name) {
                    Some(nm)
                        if nm.status.as_ref().and_then(|s| s.phase) == Some(Phase::Succeeded) =>
                    {
                        if !nm.deleting {
                            cluster.delete_maintenance(name);
                        }
                        left += 1;
                    }
                    Some(_) => left += 1,
                    None => {}
                }
            }
            if left == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(120), all_done)
        .await
        .expect("every maintenance ran and was deleted");
    assert!(monitor.max() >= 3, "the budget was used: {}", monitor.max());
    assert!(
        monitor.max() <= 3,
        "never more than 3 nodes out at once: {}",
        monitor.max()
    );
    for i in 0..12 {
        let n = cluster.node(&format!("n{i}")).unwrap();
        assert!(!n.unschedulable, "n{i} given back");
    }
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_budget_is_derived_from_the_cluster_after_a_restart() {
    let cluster = nodes(5);
    let monitor = CordonMonitor::start(&cluster);
    let h = Harness::paused(&cluster, parallel(2)).await;
    // The oldest two run; the waiting ones' names sort first, so after a restart they are
    // seen before those holding the slots.
    let names = ["z-0", "z-1", "a-2", "a-3", "a-4"];
    for (i, name) in names.iter().enumerate() {
        cluster.create_maintenance(name, &format!("n{i}"), at(i64::try_from(i).unwrap()));
    }
    assert!(
        h.wait_phase("z-1", Phase::Succeeded, Duration::from_secs(30))
            .await
    );
    assert!(eventually(Duration::from_secs(5), || queued(&cluster, "a-4")).await);
    h.stop().await;

    // One that had just started when nmo stopped: its finalizer is on, nothing else yet.
    let mut a2 = cluster.maintenance("a-2").unwrap();
    assert!(!a2.has_finalizer());
    a2.finalizers.push(crate::model::FINALIZER.to_string());
    cluster.put_maintenance(a2);

    // A new process knows nothing but the cluster: z-0, z-1 and a-2 hold slots (3 > 2, so
    // nobody starts), a-3 and a-4 keep waiting.
    let h = Harness::paused(&cluster, parallel(2)).await;
    assert!(
        h.wait_phase("a-2", Phase::Succeeded, Duration::from_secs(30))
            .await
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(h.queue().await, ["a-3", "a-4"]);
    assert!(!cluster.node("n3").unwrap().unschedulable);
    // Two deletions bring it under the cap: exactly one more starts.
    cluster.delete_maintenance("z-0");
    cluster.delete_maintenance("z-1");
    assert!(
        h.wait_phase("a-3", Phase::Succeeded, Duration::from_secs(30))
            .await
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(h.queue().await, ["a-4"]);
    assert_eq!(
        monitor.max(),
        3,
        "the two running plus the one started before the restart"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn unavailable_nodes_count_whoever_took_them_out() {
    let cluster = nodes(6);
    // n5 is NotReady and n4 cordoned by someone else: 2 of at most 3 nodes are out.
    cluster.set_node_ready("n5", false);
    let mut n4 = cluster.node("n4").unwrap();
    n4.unschedulable = true;
    cluster.set_node(n4);
    let h = Harness::paused(&cluster, |config: &mut Config| {
        config.fleet = FleetBudget {
            max_parallel: None,
            max_unavailable: Some(Limit::Count(3)),
        };
    })
    .await;
    cluster.create_maintenance("nm-0", "n0", at(0));
    cluster.create_maintenance("nm-1", "n1", at(1));
    // The NotReady node is counted once: its maintenance starts although the limit is reached.
    cluster.create_maintenance("nm-5", "n5", at(5));
    assert!(
        h.wait_phase("nm-0", Phase::Succeeded, Duration::from_secs(30))
            .await
    );
    assert!(eventually(Duration::from_secs(5), || queued(&cluster, "nm-1")).await);
    assert_eq!(
        cluster.status("nm-1").queue.unwrap().waiting_for,
        "max-unavailable-nodes: 3 of 3 unavailable"
    );
    // nm-5 is younger than nm-1, which waits: first in, first out.
    assert_eq!(h.queue().await, ["nm-1", "nm-5"]);
    // The NotReady node comes back: room for nm-1, then nm-5 (which takes n5 out again but
    // nothing more, as n5 is cordoned by then and counted once).
    cluster.set_node_ready("n5", true);
    assert!(
        h.wait_phase("nm-1", Phase::Succeeded, Duration::from_secs(30))
            .await
    );
    assert!(eventually(Duration::from_secs(5), || queued(&cluster, "nm-5")).await);
    // The other tool uncordons n4: nm-5 starts.
    let mut n4 = cluster.node("n4").unwrap();
    n4.unschedulable = false;
    cluster.set_node(n4);
    assert!(
        h.wait_phase("nm-5", Phase::Succeeded, Duration::from_secs(30))
            .await
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn deleting_a_waiting_maintenance_undoes_nothing() {
    let cluster = nodes(3);
    let h = Harness::paused(&cluster, parallel(1)).await;
    cluster.create_maintenance("nm-0", "n0", at(0));
    cluster.create_maintenance("nm-1", "n1", at(1));
    cluster.create_maintenance("nm-2", "n2", at(2));
    assert!(eventually(Duration::from_secs(5), || queued(&cluster, "nm-2")).await);
    assert_eq!(cluster.status("nm-2").queue.unwrap().position, 2);
    cluster.delete_maintenance("nm-1");
    assert!(
        cluster.maintenance("nm-1").is_none(),
        "no finalizer: gone at once"
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(calls_about(&cluster, "nm-1", "n1"), ["write_status nm-1"]);
    assert_eq!(cluster.count_calls("emit_event UncordonNode"), 0);
    assert_eq!(h.queue().await, ["nm-2"]);
    // Its place moved up (written once the last write is old enough).
    assert_eq!(cluster.status("nm-2").queue.unwrap().position, 1);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_duplicate_of_a_waiting_maintenance_is_failed_and_never_starts() {
    let cluster = nodes(2);
    let h = Harness::paused(&cluster, parallel(1)).await;
    cluster.create_maintenance("nm-0", "n0", at(0));
    cluster.create_maintenance("first", "n1", at(1));
    cluster.create_maintenance("second", "n1", at(2));
    assert!(
        h.wait_phase("second", Phase::Failed, Duration::from_secs(10))
            .await
    );
    assert!(
        cluster
            .status("second")
            .last_error
            .unwrap()
            .contains("first")
    );
    assert_eq!(h.queue().await, ["first"]);
    cluster.delete_maintenance("nm-0");
    assert!(
        h.wait_phase("first", Phase::Succeeded, Duration::from_secs(30))
            .await
    );
    assert_eq!(h.active().await, ["first"]);
    assert_eq!(phase(&cluster, "second"), Some(Phase::Failed));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn places_further_back_are_rewritten_less_often() {
    let cluster = nodes(26);
    let h = Harness::paused(&cluster, parallel(1)).await;
    for i in 0..26 {
        cluster.create_maintenance(&format!("nm-{i:02}"), &format!("n{i}"), at(i64::from(i)));
    }
    assert!(eventually(Duration::from_secs(5), || queued(&cluster, "nm-25")).await);
    let writes = |name: &str| cluster.count_calls(&format!("write_status {name}"));
    let position = |name: &str| cluster.status(name).queue.map(|q| q.position);
    assert_eq!(position("nm-05"), Some(5));
    assert_eq!(position("nm-15"), Some(15));
    assert!(
        h.wait_phase("nm-00", Phase::Succeeded, Duration::from_secs(30))
            .await
    );
    cluster.delete_maintenance("nm-00");
    assert!(h.wait_gone("nm-00", Duration::from_secs(10)).await);
    // Everyone moved up one place; the first ten are rewritten within the interval (30 s),
    // places 11 to 20 within twice that.
    tokio::time::sleep(Duration::from_secs(35)).await;
    assert_eq!(position("nm-05"), Some(4));
    assert_eq!(writes("nm-05"), 2);
    assert_eq!(position("nm-15"), Some(15), "not yet");
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(position("nm-15"), Some(14));
    assert_eq!(writes("nm-15"), 2);
    h.stop().await;
}

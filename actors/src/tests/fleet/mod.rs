//! The cluster maintenance budget: NodeMaintenances beyond it wait touching nothing, oldest
//! first, start by themselves when a slot frees, and the cap holds under churn and across a
//! restart of the actors: `waiting` (who waits, in what order, touching nothing) and `cap`
//! (the cap under churn, after a restart, and counting every unavailable node).

mod cap;
mod waiting;

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
    decisions::condition(&cluster.status(name), conditions::QUEUED)
        .is_some_and(|c| c.status == "True")
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

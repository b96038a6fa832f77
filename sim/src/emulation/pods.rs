//! A watch of a workload's pods that records what a test must rule out: a pod deleted while it
//! was still running (a VM's launcher pod before its migration ended; a Kafka broker that its
//! operator did not roll).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};

/// Pods seen deleted, or marked for deletion, while Running (by name, with their uid).
#[derive(Debug, Default)]
struct Seen {
    phases: BTreeMap<String, String>,
    deleted_running: Vec<(String, String)>,
}

/// Watches the pods that `selector` selects in `namespace`; stops when dropped.
#[derive(Debug)]
pub struct PodWatch {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for PodWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn phase(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

impl PodWatch {
    /// Starts watching.
    pub fn start(client: &kube::Client, namespace: &str, selector: &str) -> Self {
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let seen = Arc::new(Mutex::new(Seen::default()));
        let record = seen.clone();
        let config = watcher::Config::default().labels(selector);
        let task = tokio::spawn(async move {
            let mut events = watcher::watcher(api, config).boxed();
            while let Some(event) = events.next().await {
                let Ok(event) = event else { continue };
                let mut seen = record.lock().unwrap_or_else(|e| e.into_inner());
                match event {
                    Event::Apply(pod) | Event::InitApply(pod) => {
                        let name = pod.metadata.name.clone().unwrap_or_default();
                        let uid = pod.metadata.uid.clone().unwrap_or_default();
                        let phase = phase(&pod);
                        if pod.metadata.deletion_timestamp.is_some() && phase == "Running" {
                            seen.deleted_running.push((name.clone(), uid));
                        }
                        seen.phases.insert(name, phase);
                    }
                    Event::Delete(pod) => {
                        let name = pod.metadata.name.clone().unwrap_or_default();
                        let uid = pod.metadata.uid.clone().unwrap_or_default();
                        if phase(&pod) == "Running" && pod.metadata.deletion_timestamp.is_none() {
                            seen.deleted_running.push((name.clone(), uid));
                        }
                        seen.phases.remove(&name);
                    }
                    Event::Init | Event::InitDone => {}
                }
            }
        });
        PodWatch { seen, task }
    }

    /// The pods (name, uid) deleted while Running, but those whose uid is in `expected`.
    pub fn deleted_while_running(&self, expected: &HashSet<String>) -> Vec<(String, String)> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.deleted_running
            .iter()
            .filter(|(_, uid)| !expected.contains(uid))
            .cloned()
            .collect()
    }
}

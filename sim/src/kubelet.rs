//! A kubelet for every node at once: scheduled pods become Running and Ready after a (scaled)
//! startup delay; terminating pods are removed after their (scaled) grace period.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::controller::{next_batch, scaled};
use crate::object::StoredObject;
use crate::resources::names;
use crate::rest::{Api, DeleteOpts, now_rfc3339};
use crate::selectors::Filter;

/// Speed of the simulated cluster.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Multiplies every simulated delay (1.0: real time, 0: instant).
    pub time_scale: f64,
    /// Time from scheduling to Running/Ready (before scaling).
    pub pod_startup: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            time_scale: 1.0,
            pod_startup: Duration::from_secs(2),
        }
    }
}

/// `n` random lowercase hex digits.
pub fn rand_hex(n: usize) -> String {
    const HEX: &[u8] = b"0123456789abcdef";
    let mut r = rand::rng();
    (0..n)
        .map(|_| HEX[r.random_range(0..16usize)] as char)
        .collect()
}

/// A random pod IP.
pub fn pod_ip() -> String {
    let mut r = rand::rng();
    format!(
        "10.{}.{}.{}",
        r.random_range(0..=255),
        r.random_range(0..=255),
        r.random_range(2..=254)
    )
}

/// The status a running, ready pod has.
pub fn running_status(pod: &Value, host_ip: &str, ip: &str, now: &str) -> Value {
    let cond = |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": now});
    let statuses: Vec<Value> = pod
        .pointer("/spec/containers")
        .and_then(|c| c.as_array())
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    let image = c.get("image").and_then(|i| i.as_str()).unwrap_or_default();
                    let cid = rand_hex(64);
                    json!({
                        "name": c.get("name").cloned().unwrap_or(json!("")),
                        "state": {"running": {"startedAt": now}},
                        "lastState": {},
                        "ready": true,
                        "restartCount": 0,
                        "image": image,
                        "imageID": format!("{}@sha256:{}", image.split(':').next().unwrap_or(image), &cid),
                        "containerID": format!("containerd://{cid}"),
                        "started": true
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    json!({
        "phase": "Running",
        "conditions": [cond("PodReadyToStartContainers"), cond("Initialized"), cond("Ready"), cond("ContainersReady"), cond("PodScheduled")],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": now,
        "containerStatuses": statuses,
        "qosClass": crate::rest::qos_class(pod),
    })
}

fn node_ip(api: &Api, node: &str) -> Option<String> {
    let nodes = api.def(names::NODES).ok()?;
    let n = api.store.get(&nodes, "", node)?.value().ok()?;
    Some(
        n.pointer("/status/addresses")
            .and_then(|a| a.as_array())
            .and_then(|a| {
                a.iter()
                    .find(|x| x.get("type").and_then(|t| t.as_str()) == Some("InternalIP"))
            })
            .and_then(|x| x.get("address").and_then(|a| a.as_str()))
            .unwrap_or("10.0.0.1")
            .to_string(),
    )
}

fn start_pod(api: &Api, ns: &str, name: &str, uid: &str) {
    let Ok(pods) = api.def(names::PODS) else {
        return;
    };
    let _ = api.mutate(&pods, ns, name, |v| {
        let same = v.pointer("/metadata/uid").and_then(|u| u.as_str()) == Some(uid);
        let pending = v.pointer("/status/phase").and_then(|p| p.as_str()) == Some("Pending");
        let deleting = v
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|d| !d.is_null());
        let node = v
            .pointer("/spec/nodeName")
            .and_then(|n| n.as_str())
            .unwrap_or_default()
            .to_string();
        if !same || !pending || deleting || node.is_empty() {
            return Ok(false);
        }
        let Some(host) = node_ip(api, &node) else {
            return Ok(false);
        };
        v["status"] = running_status(v, &host, &pod_ip(), &now_rfc3339());
        Ok(true)
    });
}

fn finish_pod(api: &Api, ns: &str, name: &str, uid: &str) {
    let Ok(pods) = api.def(names::PODS) else {
        return;
    };
    let opts = DeleteOpts {
        grace: Some(0),
        uid: Some(uid.to_string()),
        ..Default::default()
    };
    let _ = api.delete(&pods, ns, name, &opts);
}

struct Kubelet {
    api: Arc<Api>,
    timing: Timing,
    starting: HashMap<String, AbortHandle>,
    /// uid -> (grace seconds scheduled, timer).
    stopping: HashMap<String, (i64, AbortHandle)>,
}

impl Kubelet {
    fn observe(&mut self, o: &Arc<StoredObject>, gone: bool) {
        let node = o.fields.first().map(|s| s.as_str()).unwrap_or_default();
        if gone {
            if let Some(h) = self.starting.remove(&o.uid) {
                h.abort();
            }
            if let Some((_, h)) = self.stopping.remove(&o.uid) {
                h.abort();
            }
            return;
        }
        if node.is_empty() {
            return;
        }
        let phase = o.fields.get(5).map(|s| s.as_str()).unwrap_or_default();
        if o.deleting {
            let Ok(v) = o.value() else { return };
            let grace = v
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(|g| g.as_i64())
                .unwrap_or(0);
            if self.stopping.get(&o.uid).is_some_and(|(g, _)| *g <= grace) {
                return;
            }
            if let Some((_, h)) = self.stopping.remove(&o.uid) {
                h.abort();
            }
            let api = self.api.clone();
            let (ns, name, uid) = (o.namespace.clone(), o.name.clone(), o.uid.clone());
            let d = scaled(
                Duration::from_secs(u64::try_from(grace).unwrap_or(0)),
                self.timing.time_scale,
            );
            let h = tokio::spawn(async move {
                tokio::time::sleep(d).await;
                finish_pod(&api, &ns, &name, &uid);
            })
            .abort_handle();
            self.stopping.insert(o.uid.clone(), (grace, h));
        } else if phase == "Pending" && !self.starting.contains_key(&o.uid) {
            let api = self.api.clone();
            let (ns, name, uid) = (o.namespace.clone(), o.name.clone(), o.uid.clone());
            let d = scaled(self.timing.pod_startup, self.timing.time_scale);
            let h = tokio::spawn(async move {
                tokio::time::sleep(d).await;
                start_pod(&api, &ns, &name, &uid);
            })
            .abort_handle();
            self.starting.insert(o.uid.clone(), h);
        } else if phase != "Pending"
            && let Some(h) = self.starting.remove(&o.uid)
        {
            // Started (by us or anyone else): forget the timer without aborting a running start.
            drop(h);
        }
    }

    fn resync(&mut self) {
        let Ok(pods) = self.api.def(names::PODS) else {
            return;
        };
        for o in self.api.store.list(&pods, &Filter::default(), None, 0).0 {
            self.observe(&o, false);
        }
    }
}

/// Runs the kubelet until shutdown.
pub async fn run(api: Arc<Api>, timing: Timing, mut shutdown: watch::Receiver<bool>) {
    let mut rx = api.store.subscribe();
    let mut k = Kubelet {
        api,
        timing,
        starting: HashMap::new(),
        stopping: HashMap::new(),
    };
    k.resync();
    loop {
        let Some(batch) = next_batch(&mut rx, &mut shutdown, Duration::from_secs(5)).await else {
            break;
        };
        if batch.resync {
            k.resync();
        }
        for ev in &batch.events {
            if (ev.def.group.as_str(), ev.def.plural.as_str()) != names::PODS {
                continue;
            }
            k.observe(&ev.obj, ev.kind == crate::store::EventType::Deleted);
        }
        // Forget finished timers.
        k.starting.retain(|_, h| !h.is_finished());
        k.stopping.retain(|_, (_, h)| !h.is_finished());
    }
    for h in k.starting.values() {
        h.abort();
    }
    for (_, h) in k.stopping.values() {
        h.abort();
    }
}

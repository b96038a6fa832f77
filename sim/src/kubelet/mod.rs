//! The kubelet: scheduled pods become Running and Ready after a (scaled) startup delay;
//! terminating pods are removed after their (scaled) grace period.
//!
//! What to do about a pod is decided once, in [`rules`]; this module applies those decisions
//! to the simulator's store for every node at once ([`run`]), and [`remote`] applies the same
//! decisions through a kube client to any API server (the kubelet stand-in for a real
//! kube-apiserver, which has none).

pub mod remote;
pub mod rules;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::controller::next_batch;
use crate::object::StoredObject;
use crate::resources::names;
use crate::rest::{Api, DeleteOpts, now_rfc3339};
use crate::selectors::Filter;

use rules::{Decision, FINISH_GRACE_SECONDS, PodFacts, Underway};
pub use rules::{Timing, pod_ip, rand_hex, running_status};

fn node_ip(api: &Api, node: &str) -> Option<String> {
    let nodes = api.def(names::NODES).ok()?;
    let n = api.store.get(&nodes, "", node)?.value().ok()?;
    Some(rules::node_internal_ip(&n))
}

fn start_pod(api: &Api, ns: &str, name: &str, uid: &str) {
    let Ok(pods) = api.def(names::PODS) else {
        return;
    };
    let _ = api.mutate(&pods, ns, name, |v| {
        let facts = PodFacts::of(v);
        if !rules::may_start(&facts, uid) {
            return Ok(false);
        }
        let Some(host) = node_ip(api, &facts.node) else {
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
        grace: Some(FINISH_GRACE_SECONDS),
        uid: Some(uid.to_string()),
        ..Default::default()
    };
    let _ = api.delete(&pods, ns, name, &opts);
}

/// The facts of a stored pod, from its indexed fields; its JSON is parsed only for a pod being
/// deleted (its grace period), so a resync over 60,000 pods parses almost nothing.
fn facts_of(o: &StoredObject) -> Option<PodFacts> {
    let field = |i: usize| o.fields.get(i).cloned().unwrap_or_default();
    let grace_seconds = if o.deleting {
        let v = o.value().ok()?;
        PodFacts::of(&v).grace_seconds
    } else {
        0
    };
    Some(PodFacts {
        uid: o.uid.clone(),
        // Aligned with the pods' selectable fields: spec.nodeName first, status.phase sixth.
        node: field(0),
        phase: field(5),
        deleting: o.deleting,
        grace_seconds,
    })
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
        let facts = if gone { None } else { facts_of(o) };
        let underway = Underway {
            starting: self.starting.contains_key(&o.uid),
            finishing_after_grace: self.stopping.get(&o.uid).map(|(grace, _)| *grace),
        };
        match rules::decide(facts.as_ref(), underway, &self.timing) {
            Decision::Nothing => {}
            Decision::CancelAll => {
                if let Some(h) = self.starting.remove(&o.uid) {
                    h.abort();
                }
                if let Some((_, h)) = self.stopping.remove(&o.uid) {
                    h.abort();
                }
            }
            Decision::Start { after } => {
                let api = self.api.clone();
                let (ns, name, uid) = (o.namespace.clone(), o.name.clone(), o.uid.clone());
                let h = tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    start_pod(&api, &ns, &name, &uid);
                })
                .abort_handle();
                self.starting.insert(o.uid.clone(), h);
            }
            Decision::Finish {
                grace_seconds,
                after,
            } => {
                if let Some((_, h)) = self.stopping.remove(&o.uid) {
                    h.abort();
                }
                let api = self.api.clone();
                let (ns, name, uid) = (o.namespace.clone(), o.name.clone(), o.uid.clone());
                let h = tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    finish_pod(&api, &ns, &name, &uid);
                })
                .abort_handle();
                self.stopping.insert(o.uid.clone(), (grace_seconds, h));
            }
            Decision::ForgetStart => {
                // Started (by us or anyone else): forget the timer without aborting a running
                // start.
                self.starting.remove(&o.uid);
            }
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

//! A scheduler-lite: places pending, unscheduled pods on schedulable nodes whose NoSchedule and
//! NoExecute taints they tolerate and whose labels match their nodeSelector, preferring the
//! emptiest node.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::controller::next_batch;
use crate::object::{Key, StoredObject};
use crate::resources::names;
use crate::rest::{Api, now_rfc3339};
use crate::selectors::{FieldReq, FieldSelector, FieldTarget, Filter};
use crate::store::EventType;

#[derive(Debug, Clone)]
struct NodeInfo {
    unschedulable: bool,
    taints: Vec<Value>,
    labels: Vec<(String, String)>,
}

fn node_info(v: &Value) -> NodeInfo {
    NodeInfo {
        unschedulable: v.pointer("/spec/unschedulable").and_then(|u| u.as_bool()) == Some(true),
        taints: v
            .pointer("/spec/taints")
            .and_then(|t| t.as_array())
            .cloned()
            .unwrap_or_default(),
        labels: v
            .pointer("/metadata/labels")
            .and_then(|l| l.as_object())
            .map(|l| {
                l.iter()
                    .map(|(k, x)| (k.clone(), x.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Whether a pod fits a node (schedulable, taints tolerated, nodeSelector matched).
pub fn node_fits(pod: &Value, node: &Value) -> bool {
    fits(&PodNeeds::of(pod), &node_info(node))
}

/// Whether a toleration tolerates a taint (the real matching rules).
pub fn tolerates(tol: &Value, taint: &Value) -> bool {
    let s = |v: &Value, k: &str| -> String {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let te = s(tol, "effect");
    if !te.is_empty() && te != s(taint, "effect") {
        return false;
    }
    let tk = s(tol, "key");
    let op = s(tol, "operator");
    if tk.is_empty() {
        return op == "Exists";
    }
    if tk != s(taint, "key") {
        return false;
    }
    match op.as_str() {
        "Exists" => true,
        "" | "Equal" => s(tol, "value") == s(taint, "value"),
        _ => false,
    }
}

/// What a pod asks of a node, read once per pod: a pod is tried against every node.
struct PodNeeds<'a> {
    tolerations: &'a [Value],
    selector: Option<&'a serde_json::Map<String, Value>>,
}

impl<'a> PodNeeds<'a> {
    fn of(pod: &'a Value) -> Self {
        PodNeeds {
            tolerations: pod
                .pointer("/spec/tolerations")
                .and_then(Value::as_array)
                .map_or(&[], Vec::as_slice),
            selector: pod.pointer("/spec/nodeSelector").and_then(Value::as_object),
        }
    }
}

fn fits(needs: &PodNeeds<'_>, node: &NodeInfo) -> bool {
    if node.unschedulable {
        return false;
    }
    for t in &node.taints {
        let effect = t.get("effect").and_then(|e| e.as_str()).unwrap_or_default();
        if (effect == "NoSchedule" || effect == "NoExecute")
            && !needs.tolerations.iter().any(|tol| tolerates(tol, t))
        {
            return false;
        }
    }
    if let Some(sel) = needs.selector {
        for (k, v) in sel {
            if !node
                .labels
                .iter()
                .any(|(lk, lv)| lk == k && Some(lv.as_str()) == v.as_str())
            {
                return false;
            }
        }
    }
    true
}

struct Scheduler {
    api: Arc<Api>,
    nodes: BTreeMap<String, NodeInfo>,
    pending: BTreeSet<Key>,
}

impl Scheduler {
    fn load_nodes(&mut self) {
        self.nodes.clear();
        let Ok(d) = self.api.def(names::NODES) else {
            return;
        };
        for n in self.api.store.list(&d, &Filter::default(), None, 0).0 {
            if let Ok(v) = n.value() {
                self.nodes.insert(n.name.clone(), node_info(&v));
            }
        }
    }

    fn load_pending(&mut self) {
        let Ok(d) = self.api.def(names::PODS) else {
            return;
        };
        let filter = Filter {
            fields: FieldSelector(vec![FieldReq {
                target: FieldTarget::Field(0),
                value: String::new(),
                negate: false,
            }]),
            ..Default::default()
        };
        for p in self.api.store.list(&d, &filter, None, 0).0 {
            if !p.deleting && p.fields.get(5).map(|s| s.as_str()) == Some("Pending") {
                self.pending.insert(p.key());
            }
        }
    }

    fn schedule_all(&mut self) {
        let Ok(pods) = self.api.def(names::PODS) else {
            return;
        };
        let keys: Vec<Key> = self.pending.iter().cloned().collect();
        let mut sizes = self.api.store.index_sizes(&pods);
        for key in keys {
            let Some(p) = self.api.store.get(&pods, &key.0, &key.1) else {
                self.pending.remove(&key);
                continue;
            };
            let Ok(v) = p.value() else { continue };
            if !ours_to_schedule(&p, &v) {
                self.pending.remove(&key);
                continue;
            }
            let needs = PodNeeds::of(&v);
            let best = self
                .nodes
                .iter()
                .filter(|(_, n)| fits(&needs, n))
                .min_by_key(|(name, _)| sizes.get(name.as_str()).copied().unwrap_or(0))
                .map(|(name, _)| name.clone());
            if let Some(b) = &best {
                *sizes.entry(b.clone()).or_insert(0) += 1;
            }
            let total = self.nodes.len();
            let res = self.api.mutate(&pods, &key.0, &key.1, |o| {
                Ok(place(o, best.as_deref(), total))
            });
            if best.is_some() || res.is_err() {
                self.pending.remove(&key);
            }
        }
    }
}

/// A pod this scheduler is to place: not being deleted, not on a node yet, and asking for
/// the default scheduler.
fn ours_to_schedule(p: &StoredObject, v: &Value) -> bool {
    if p.deleting || !p.fields.first().is_none_or(|n| n.is_empty()) {
        return false;
    }
    v.pointer("/spec/schedulerName")
        .and_then(|s| s.as_str())
        .is_none_or(|s| s == "default-scheduler")
}

/// Binds pod `o` to node `best`, or, with no node for it among `total`, says why in its
/// PodScheduled condition; false when that changes nothing.
fn place(o: &mut Value, best: Option<&str>, total: usize) -> bool {
    if o.pointer("/spec/nodeName")
        .and_then(|n| n.as_str())
        .is_some_and(|n| !n.is_empty())
    {
        return false;
    }
    let conds: Vec<Value> = o
        .pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.get("type").and_then(|t| t.as_str()) != Some("PodScheduled"))
        .collect();
    let mut conds = conds;
    match best {
        Some(node) => {
            o["spec"]["nodeName"] = json!(node);
            conds.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now_rfc3339()}));
        }
        None => {
            let msg = format!(
                "0/{total} nodes are available: {total} node(s) didn't match Pod's node affinity/selector, had untolerated taint, or were unschedulable. preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling."
            );
            let existing = o
                .pointer("/status/conditions")
                .and_then(|c| c.as_array())
                .and_then(|c| {
                    c.iter()
                        .find(|x| x.get("type").and_then(|t| t.as_str()) == Some("PodScheduled"))
                })
                .and_then(|c| c.get("message"))
                .and_then(|m| m.as_str())
                .map(String::from);
            if existing.as_deref() == Some(msg.as_str()) {
                return false;
            }
            conds.push(json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg, "lastProbeTime": null, "lastTransitionTime": now_rfc3339()}));
        }
    }
    o["status"]["conditions"] = Value::Array(conds);
    true
}

/// Runs the scheduler until shutdown.
pub async fn run(api: Arc<Api>, mut shutdown: watch::Receiver<bool>) {
    let mut rx = api.store.subscribe();
    let mut s = Scheduler {
        api,
        nodes: BTreeMap::new(),
        pending: BTreeSet::new(),
    };
    s.load_nodes();
    s.load_pending();
    s.schedule_all();
    loop {
        let Some(batch) = next_batch(&mut rx, &mut shutdown, Duration::from_secs(1)).await else {
            return;
        };
        if batch.resync {
            s.load_nodes();
            s.load_pending();
        }
        for ev in &batch.events {
            let gp = (ev.def.group.as_str(), ev.def.plural.as_str());
            if gp == names::NODES {
                if ev.kind == EventType::Deleted {
                    s.nodes.remove(&ev.obj.name);
                } else if let Ok(v) = ev.obj.value() {
                    s.nodes.insert(ev.obj.name.clone(), node_info(&v));
                }
            } else if gp == names::PODS {
                let o = &ev.obj;
                let unscheduled = o.fields.first().is_none_or(|n| n.is_empty());
                if ev.kind != EventType::Deleted
                    && unscheduled
                    && !o.deleting
                    && o.fields.get(5).map(|s| s.as_str()) == Some("Pending")
                {
                    s.pending.insert(o.key());
                } else {
                    s.pending.remove(&o.key());
                }
            }
        }
        if !s.pending.is_empty() {
            s.schedule_all();
        }
    }
}

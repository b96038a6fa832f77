//! The disruption controller: computes PodDisruptionBudget status (`currentHealthy`,
//! `desiredHealthy`, `disruptionsAllowed`, `expectedPods`, `observedGeneration`, `disruptedPods`,
//! the `DisruptionAllowed` condition) the way kube-controller-manager does.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::controller::next_batch;
use crate::errors::ApiError;
use crate::object::StoredObject;
use crate::resources::names;
use crate::rest::{Api, now_rfc3339};
use crate::selectors::{Filter, LabelSelector};
use crate::store::EventType;

/// How long an eviction stays in `disruptedPods` without the pod being deleted.
const DELETION_TIMEOUT_SECS: i64 = 120;

/// The pod's Ready condition is True.
pub fn pod_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .is_some_and(|c| {
            c.iter().any(|x| {
                x.get("type").and_then(|t| t.as_str()) == Some("Ready")
                    && x.get("status").and_then(|t| t.as_str()) == Some("True")
            })
        })
}

/// Sets the DisruptionAllowed condition, keeping its transition time when unchanged.
pub fn set_condition(status: &mut Value, allowed: i64, generation: i64) {
    let (st, reason) = if allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    let prev = status
        .get("conditions")
        .and_then(|c| c.as_array())
        .and_then(|c| {
            c.iter()
                .find(|x| x.get("type").and_then(|t| t.as_str()) == Some("DisruptionAllowed"))
        })
        .cloned();
    let ltt = match &prev {
        Some(p) if p.get("status").and_then(|s| s.as_str()) == Some(st) => p
            .get("lastTransitionTime")
            .cloned()
            .unwrap_or(json!(now_rfc3339())),
        _ => json!(now_rfc3339()),
    };
    status["conditions"] = json!([{
        "type": "DisruptionAllowed", "status": st, "reason": reason, "message": "",
        "observedGeneration": generation, "lastTransitionTime": ltt
    }]);
}

/// A number of pods as the API's integer fields hold it (saturating, never wrapping).
fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `GetScaledValueFromIntOrPercent` with rounding up.
fn scaled_up(v: &Value, total: i64) -> Result<i64, String> {
    match v {
        Value::Number(n) => n.as_i64().ok_or_else(|| "invalid value".to_string()),
        Value::String(s) => match s.strip_suffix('%') {
            Some(p) => {
                let p: i64 = p
                    .parse()
                    .map_err(|_| format!("invalid value for IntOrString: invalid value {s:?}"))?;
                Ok((p * total + 99) / 100)
            }
            None => s.parse().map_err(|_| {
                "invalid value for IntOrString: invalid type: string is not a percentage"
                    .to_string()
            }),
        },
        _ => Err("invalid value".into()),
    }
}

/// The expected scale: sum of the replicas of the pods' controllers (ReplicaSets here; other
/// controllers have no scale the simulator knows, which the real controller reports as an error).
fn expected_scale(api: &Api, pods: &[Arc<StoredObject>]) -> Result<i64, String> {
    let rs_key = format!("{}/{}", names::REPLICASETS.0, names::REPLICASETS.1);
    let rsdef = api.def(names::REPLICASETS).map_err(|e| e.message)?;
    let mut seen = HashSet::new();
    let mut total = 0;
    for p in pods {
        let Some(uid) = &p.controller_uid else {
            return Err(format!("found no controller ref for pod {:?}", p.name));
        };
        if !seen.insert(uid.clone()) {
            continue;
        }
        let missing = || format!("found no controllers for pod {:?}", p.name);
        let (tkey, key) = api.store.lookup_uid(uid).ok_or_else(missing)?;
        if tkey != rs_key {
            return Err(missing());
        }
        let rs = api.store.get(&rsdef, &key.0, &key.1).ok_or_else(missing)?;
        let v = rs.value().map_err(|e| e.message)?;
        total += v
            .pointer("/spec/replicas")
            .and_then(|r| r.as_i64())
            .unwrap_or(1);
    }
    Ok(total)
}

/// The status of one PDB given the pods of its namespace.
pub fn compute_status(api: &Api, pdb: &Value, ns_pods: &[Arc<StoredObject>]) -> Value {
    let generation = pdb
        .pointer("/metadata/generation")
        .and_then(|g| g.as_i64())
        .unwrap_or(1);
    let old = pdb.get("status").cloned().unwrap_or(json!({}));
    let pods = selected_pods(pdb, ns_pods);
    let (expected, desired) = match expected_and_desired(api, pdb, &pods) {
        Ok(c) => c,
        Err(msg) => return fail_safe(&old, generation, &msg),
    };
    let disrupted = still_disrupted(&old, &pods);
    let healthy = pods
        .iter()
        .filter(|p| !p.deleting && !disrupted.contains_key(&p.name) && p.ready)
        .count();
    let healthy = count(healthy);
    let mut allowed = healthy - desired;
    if expected <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let mut st = json!({
        "observedGeneration": generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
    });
    if !disrupted.is_empty() {
        st["disruptedPods"] = Value::Object(disrupted);
    }
    if let Some(c) = old.get("conditions") {
        st["conditions"] = c.clone();
    }
    set_condition(&mut st, allowed, generation);
    st
}

/// The pods of the namespace the PDB's selector matches.
fn selected_pods(pdb: &Value, ns_pods: &[Arc<StoredObject>]) -> Vec<Arc<StoredObject>> {
    let sel = pdb
        .pointer("/spec/selector")
        .map(LabelSelector::from_object)
        .and_then(|s| s.ok());
    match &sel {
        // A null selector matches nothing, an empty one everything (policy/v1).
        None => Vec::new(),
        Some(s) => ns_pods
            .iter()
            .filter(|p| s.matches(&p.labels))
            .cloned()
            .collect(),
    }
}

/// (expected pods, desired healthy pods) of the PDB, or why they cannot be known.
fn expected_and_desired(
    api: &Api,
    pdb: &Value,
    pods: &[Arc<StoredObject>],
) -> Result<(i64, i64), String> {
    if let Some(mu) = pdb.pointer("/spec/maxUnavailable") {
        expected_scale(api, pods).and_then(|expected| {
            let mu = scaled_up(mu, expected)?;
            Ok((expected, (expected - mu).max(0)))
        })
    } else if let Some(ma) = pdb.pointer("/spec/minAvailable") {
        match ma {
            Value::Number(n) => Ok((count(pods.len()), n.as_i64().unwrap_or(0))),
            _ => expected_scale(api, pods)
                .and_then(|expected| Ok((expected, scaled_up(ma, expected)?))),
        }
    } else {
        Ok((count(pods.len()), 0))
    }
}

/// The disruption controller's failSafe: no disruption allowed, everything else kept.
fn fail_safe(old: &Value, generation: i64, msg: &str) -> Value {
    let mut st = old.clone();
    st["disruptionsAllowed"] = json!(0);
    st["observedGeneration"] = json!(generation);
    st["conditions"] = json!([{
        "type": "DisruptionAllowed", "status": "False", "reason": "SyncFailed",
        "message": msg, "observedGeneration": generation, "lastTransitionTime": now_rfc3339()
    }]);
    if let Some(prev) = old.get("conditions").and_then(|c| c.get(0))
        && prev.get("reason") == Some(&json!("SyncFailed"))
        && prev.get("message") == Some(&json!(msg))
    {
        st["conditions"] = json!([prev]);
    }
    st
}

/// disruptedPods: keeps entries whose pod still exists, is not being deleted, and whose
/// eviction is recent.
fn still_disrupted(old: &Value, pods: &[Arc<StoredObject>]) -> serde_json::Map<String, Value> {
    let now = chrono::Utc::now();
    let mut disrupted = serde_json::Map::new();
    if let Some(d) = old.get("disruptedPods").and_then(|d| d.as_object()) {
        for (name, ts) in d {
            let Some(p) = pods.iter().find(|p| &p.name == name) else {
                continue;
            };
            if p.deleting {
                continue;
            }
            let fresh = ts
                .as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .is_some_and(|t| {
                    (now - t.with_timezone(&chrono::Utc)).num_seconds() < DELETION_TIMEOUT_SECS
                });
            if fresh {
                disrupted.insert(name.clone(), ts.clone());
            }
        }
    }
    disrupted
}

/// Recomputes the PDBs of one namespace (all, or the named ones); writes statuses that changed.
pub fn sync_namespace(api: &Api, ns: &str) -> Result<(), ApiError> {
    sync_pdbs(api, ns, None)
}

fn sync_pdbs(api: &Api, ns: &str, only: Option<&HashSet<String>>) -> Result<(), ApiError> {
    let pdbs = api.def(names::PDBS)?;
    let filter = Filter {
        namespace: Some(ns.to_string()),
        ..Default::default()
    };
    let list: Vec<_> = api
        .store
        .list(&pdbs, &filter, None, 0)
        .0
        .into_iter()
        .filter(|p| only.is_none_or(|o| o.contains(&p.name)))
        .collect();
    if list.is_empty() {
        return Ok(());
    }
    let pods = api.def(names::PODS)?;
    let ns_pods = api.store.list(&pods, &filter, None, 0).0;
    for p in list {
        api.mutate(&pdbs, ns, &p.name, |v| {
            let st = compute_status(api, v, &ns_pods);
            if v.get("status") == Some(&st) {
                return Ok(false);
            }
            v["status"] = st;
            Ok(true)
        })?;
    }
    Ok(())
}

/// The selectors of every PDB, by namespace, to route pod changes to the PDBs they concern.
#[derive(Default)]
struct Selectors(HashMap<String, HashMap<String, Option<LabelSelector>>>);

impl Selectors {
    fn load(api: &Api) -> Self {
        let mut s = Selectors::default();
        if let Ok(d) = api.def(names::PDBS) {
            for p in api.store.list(&d, &Filter::default(), None, 0).0 {
                s.update(&p);
            }
        }
        s
    }

    fn update(&mut self, p: &StoredObject) {
        let sel = p
            .value()
            .ok()
            .and_then(|v| v.pointer("/spec/selector").map(LabelSelector::from_object))
            .and_then(|r| r.ok());
        self.0
            .entry(p.namespace.clone())
            .or_default()
            .insert(p.name.clone(), sel);
    }

    fn remove(&mut self, p: &StoredObject) {
        if let Some(m) = self.0.get_mut(&p.namespace) {
            m.remove(&p.name);
        }
    }

    fn all(&self) -> HashMap<String, HashSet<String>> {
        self.0
            .iter()
            .map(|(ns, m)| (ns.clone(), m.keys().cloned().collect()))
            .collect()
    }

    fn matching(&self, ns: &str, labels: &[&[(String, String)]]) -> Vec<String> {
        self.0
            .get(ns)
            .map(|m| {
                m.iter()
                    .filter(|(_, s)| {
                        s.as_ref()
                            .is_some_and(|s| labels.iter().any(|l| s.matches(l)))
                    })
                    .map(|(n, _)| n.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Runs the controller until shutdown. Only the PDBs whose selector matches a changed pod (before
/// or after the change) are recomputed.
pub async fn run(api: Arc<Api>, mut shutdown: watch::Receiver<bool>) {
    let mut rx = api.store.subscribe();
    let mut sels = Selectors::load(&api);
    let mut dirty = sels.all();
    let mut last_full = tokio::time::Instant::now();
    loop {
        for (ns, names) in dirty.drain() {
            if let Err(e) = sync_pdbs(&api, &ns, Some(&names)) {
                tracing::debug!(namespace = %ns, error = %e, "PDB sync failed");
            }
        }
        let Some(batch) = next_batch(&mut rx, &mut shutdown, Duration::from_secs(1)).await else {
            return;
        };
        // Periodic resync expires old disruptedPods entries.
        if batch.resync || last_full.elapsed() > Duration::from_secs(10) {
            sels = Selectors::load(&api);
            dirty = sels.all();
            last_full = tokio::time::Instant::now();
        }
        for ev in &batch.events {
            let gp = (ev.def.group.as_str(), ev.def.plural.as_str());
            let ns = &ev.obj.namespace;
            if gp == names::PDBS {
                if ev.kind == EventType::Deleted {
                    sels.remove(&ev.obj);
                } else {
                    sels.update(&ev.obj);
                    dirty
                        .entry(ns.clone())
                        .or_default()
                        .insert(ev.obj.name.clone());
                }
            } else if gp == names::PODS {
                let mut labels: Vec<&[(String, String)]> = vec![&ev.obj.labels];
                if let Some(p) = &ev.prev {
                    labels.push(&p.labels);
                }
                let hit = sels.matching(ns, &labels);
                if !hit.is_empty() {
                    dirty.entry(ns.clone()).or_default().extend(hit);
                }
            } else if gp == names::REPLICASETS
                && let Some(m) = sels.0.get(ns)
            {
                dirty
                    .entry(ns.clone())
                    .or_default()
                    .extend(m.keys().cloned());
            }
        }
    }
}

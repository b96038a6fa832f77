//! The owners of pods: a ReplicaSet controller that keeps `spec.replicas` active pods (new pods
//! get a generateName, an owner reference, and start Pending and unscheduled) and maintains the
//! ReplicaSet status; DaemonSet status (DaemonSets do not create pods here).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::watch;

use crate::controller::next_batch;
use crate::object::{Key, StoredObject};
use crate::resources::names;
use crate::rest::{Api, DeleteOpts};
use crate::selectors::Filter;

fn active(p: &StoredObject) -> bool {
    !p.deleting
        && !matches!(
            p.fields.get(5).map(|s| s.as_str()),
            Some("Succeeded") | Some("Failed")
        )
}

/// The pods a controller owns, through the store's owner index (O(owned pods)). Adoption of
/// orphans matching the selector is not simulated.
fn owned_pods(api: &Api, ns: &str, uid: &str) -> Vec<Arc<StoredObject>> {
    let Ok(pods) = api.def(names::PODS) else {
        return Vec::new();
    };
    api.store.dependents_of(&pods, ns, uid)
}

fn sync_rs(api: &Api, key: &Key) {
    let (Ok(rsdef), Ok(pods)) = (api.def(names::REPLICASETS), api.def(names::PODS)) else {
        return;
    };
    let Some(rs) = api.store.get(&rsdef, &key.0, &key.1) else {
        return;
    };
    let Ok(v) = rs.value() else { return };
    if rs.deleting {
        return;
    }
    let replicas = v
        .pointer("/spec/replicas")
        .and_then(|r| r.as_i64())
        .unwrap_or(1);
    let owned = owned_pods(api, &key.0, &rs.uid);
    let act: Vec<&Arc<StoredObject>> = owned.iter().filter(|p| active(p)).collect();
    let diff = replicas - i64::try_from(act.len()).unwrap_or(i64::MAX);
    if diff > 0 {
        let template = v.pointer("/spec/template").cloned().unwrap_or(json!({}));
        for _ in 0..diff {
            let pod = replica(key, &rs.uid, &template);
            if let Err(e) = api.create(&pods, &key.0, pod, false, false) {
                tracing::debug!(rs = %key.1, error = %e, "replica create failed");
                break;
            }
        }
    } else if diff < 0 {
        for p in surplus(&act, usize::try_from(-diff).unwrap_or(0)) {
            let _ = api.delete(&pods, &p.namespace, &p.name, &DeleteOpts::default());
        }
    }
    // Status from the pods as they are now.
    let owned = owned_pods(api, &key.0, &rs.uid);
    let act: Vec<&Arc<StoredObject>> = owned.iter().filter(|p| active(p)).collect();
    let ready = act.iter().filter(|p| p.ready).count();
    let generation = v
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(1));
    let status = json!({
        "replicas": act.len(),
        "fullyLabeledReplicas": act.len(),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "observedGeneration": generation,
    });
    let _ = api.mutate(&rsdef, &key.0, &key.1, |o| {
        if o.get("status") == Some(&status) {
            return Ok(false);
        }
        o["status"] = status.clone();
        Ok(true)
    });
}

/// A new pod of ReplicaSet `key` (uid `uid`) from its pod template: owned by it, named after
/// it, unscheduled.
fn replica(key: &Key, uid: &str, template: &serde_json::Value) -> serde_json::Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": template.get("metadata").cloned().unwrap_or(json!({})),
        "spec": template.get("spec").cloned().unwrap_or(json!({})),
    });
    pod["metadata"]["generateName"] = json!(format!("{}-", key.1));
    pod["metadata"]["namespace"] = json!(key.0);
    pod["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": key.1, "uid": uid,
        "controller": true, "blockOwnerDeletion": true
    }]);
    if let Some(m) = pod["spec"].as_object_mut() {
        m.remove("nodeName");
    }
    pod
}

/// The `n` active pods a ReplicaSet with too many removes.
fn surplus<'a>(act: &[&'a Arc<StoredObject>], n: usize) -> Vec<&'a Arc<StoredObject>> {
    // Prefer removing unscheduled, then not-ready pods, like the real ranking does.
    let mut victims: Vec<(i32, &Arc<StoredObject>)> = act
        .iter()
        .map(|p| {
            let rank = if p.fields.first().is_none_or(|n| n.is_empty()) {
                0
            } else if !p.ready {
                1
            } else {
                2
            };
            (rank, *p)
        })
        .collect();
    victims.sort_by_key(|(r, _)| *r);
    victims.into_iter().take(n).map(|(_, p)| p).collect()
}

fn sync_ds(api: &Api, key: &Key) {
    let (Ok(dsdef), Ok(nodes)) = (api.def(names::DAEMONSETS), api.def(names::NODES)) else {
        return;
    };
    let Some(ds) = api.store.get(&dsdef, &key.0, &key.1) else {
        return;
    };
    let Ok(v) = ds.value() else { return };
    if ds.deleting {
        return;
    }
    let desired = place_daemon_pods(api, key, &ds.uid, &v, &nodes);
    let owned = owned_pods(api, &key.0, &ds.uid);
    let act: Vec<&Arc<StoredObject>> = owned.iter().filter(|p| active(p)).collect();
    let ready = act.iter().filter(|p| p.ready).count();
    let status = json!({
        "currentNumberScheduled": act.len(),
        "desiredNumberScheduled": desired,
        "numberMisscheduled": 0,
        "numberReady": ready,
        "numberAvailable": ready,
        "updatedNumberScheduled": act.len(),
        "observedGeneration": v.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
    });
    let _ = api.mutate(&dsdef, &key.0, &key.1, |o| {
        if o.get("status") == Some(&status) {
            return Ok(false);
        }
        o["status"] = status.clone();
        Ok(true)
    });
}

/// The tolerations the DaemonSet controller adds to its pods.
fn daemon_tolerations(spec: &mut serde_json::Value) {
    let mut tol = spec
        .get("tolerations")
        .and_then(|t| t.as_array())
        .cloned()
        .unwrap_or_default();
    for (key, effect) in [
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ] {
        if !tol
            .iter()
            .any(|t| t.get("key").and_then(|k| k.as_str()) == Some(key))
        {
            tol.push(json!({"key": key, "operator": "Exists", "effect": effect}));
        }
    }
    spec["tolerations"] = serde_json::Value::Array(tol);
}

/// Creates the missing pod of each node the DaemonSet should run on (nodeSelector matches,
/// NoSchedule/NoExecute taints tolerated; cordoned nodes included, as the real controller
/// tolerates `unschedulable`). Returns the number of such nodes.
fn place_daemon_pods(
    api: &Api,
    key: &Key,
    uid: &str,
    ds: &serde_json::Value,
    nodes: &Arc<crate::resources::ResourceDef>,
) -> usize {
    let Ok(pods) = api.def(names::PODS) else {
        return 0;
    };
    let template = ds.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let mut spec = template.get("spec").cloned().unwrap_or(json!({}));
    daemon_tolerations(&mut spec);
    let probe = json!({"spec": spec});
    let covered: HashSet<String> = owned_pods(api, &key.0, uid)
        .iter()
        .filter(|p| active(p))
        .filter_map(|p| p.fields.first().cloned())
        .collect();
    let mut desired = 0;
    for n in api.store.list(nodes, &Filter::default(), None, 0).0 {
        if covered.contains(&n.name) {
            // Already running there (parsing every node on each sync would be costly).
            desired += 1;
            continue;
        }
        let Ok(nv) = n.value() else { continue };
        let mut schedulable = nv.clone();
        // Cordoned nodes still run daemons.
        schedulable["spec"]["unschedulable"] = json!(false);
        if n.deleting || !crate::scheduler::node_fits(&probe, &schedulable) {
            continue;
        }
        desired += 1;
        let mut pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": template.get("metadata").cloned().unwrap_or(json!({})),
            "spec": spec.clone(),
        });
        pod["metadata"]["generateName"] = json!(format!("{}-", key.1));
        pod["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "apps/v1", "kind": "DaemonSet", "name": key.1, "uid": uid,
            "controller": true, "blockOwnerDeletion": true
        }]);
        pod["spec"]["nodeName"] = json!(n.name);
        if let Err(e) = api.create(&pods, &key.0, pod, false, false) {
            tracing::debug!(ds = %key.1, error = %e, "daemon pod create failed");
        }
    }
    desired
}

fn all_keys(api: &Api, gp: (&str, &str)) -> HashSet<Key> {
    match api.def(gp) {
        Ok(d) => api
            .store
            .list(&d, &Filter::default(), None, 0)
            .0
            .iter()
            .map(|o| o.key())
            .collect(),
        Err(_) => HashSet::new(),
    }
}

/// Runs the ReplicaSet controller and DaemonSet status until shutdown.
pub async fn run(api: Arc<Api>, mut shutdown: watch::Receiver<bool>) {
    let mut rx = api.store.subscribe();
    let rs_key = format!("{}/{}", names::REPLICASETS.0, names::REPLICASETS.1);
    let ds_key = format!("{}/{}", names::DAEMONSETS.0, names::DAEMONSETS.1);
    let mut rs_dirty = all_keys(&api, names::REPLICASETS);
    let mut ds_dirty = all_keys(&api, names::DAEMONSETS);
    loop {
        for k in rs_dirty.drain() {
            sync_rs(&api, &k);
        }
        for k in ds_dirty.drain() {
            sync_ds(&api, &k);
        }
        let Some(batch) = next_batch(&mut rx, &mut shutdown, Duration::from_secs(5)).await else {
            return;
        };
        if batch.resync {
            rs_dirty = all_keys(&api, names::REPLICASETS);
            ds_dirty = all_keys(&api, names::DAEMONSETS);
        }
        for ev in &batch.events {
            let gp = (ev.def.group.as_str(), ev.def.plural.as_str());
            if gp == names::REPLICASETS {
                rs_dirty.insert(ev.obj.key());
            } else if gp == names::DAEMONSETS {
                ds_dirty.insert(ev.obj.key());
            } else if gp == names::NODES && ev.kind != crate::store::EventType::Modified {
                ds_dirty.extend(all_keys(&api, names::DAEMONSETS));
            } else if gp == names::PODS {
                // A pod still active after a change (scheduled, started, a new status) was
                // active before it too (an ended or terminating pod never comes back): only a
                // pod's arrival, its end or its removal changes what its owner must do.
                if ev.kind == crate::store::EventType::Modified && active(&ev.obj) {
                    continue;
                }
                for uid in &ev.obj.owner_uids {
                    if let Some((t, k)) = api.store.lookup_uid(uid) {
                        if t == rs_key {
                            rs_dirty.insert(k);
                        } else if t == ds_key {
                            ds_dirty.insert(k);
                        }
                    }
                }
            }
        }
    }
}

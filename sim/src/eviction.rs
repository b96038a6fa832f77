//! The `pods/eviction` subresource, following the real registry's semantics: terminal, pending
//! and terminating pods are deleted without a PDB check; more than one matching PDB is a 500;
//! an unready pod may go when the budget is already met (or the PDB's
//! `unhealthyPodEvictionPolicy` is `AlwaysAllow`); otherwise `disruptionsAllowed` is checked and
//! decremented and the pod recorded in `disruptedPods`, or the request gets a 429.

use serde_json::{Value, json};

use crate::errors::{ApiError, cause};
use crate::object::StoredObject;
use crate::pdb::pod_ready;
use crate::resources::{ResourceDef, names};
use crate::rest::{Api, DeleteOpts, now_rfc3339};
use crate::selectors::{Filter, LabelSelector};

/// Above this many unconfirmed evictions a PDB refuses more (the real `MaxDisruptedPodSize`).
const MAX_DISRUPTED_POD_SIZE: usize = 2000;

fn still_processing(pdb: &str) -> ApiError {
    ApiError::too_many_requests(
        "Cannot evict pod as it would violate the pod's disruption budget.",
        10,
        vec![cause(
            "DisruptionBudget",
            &format!("The disruption budget {pdb} is still being processed by the server."),
            None,
        )],
    )
}

/// Handles POST `.../pods/<name>/eviction`.
pub fn evict(api: &Api, ns: &str, name: &str, body: &Value) -> Result<(), ApiError> {
    check_eviction(name, body)?;
    let pods = api.def(names::PODS)?;
    let pdbs = api.def(names::PDBS)?;
    // Admission (NamespaceLifecycle) runs first: creating an eviction in a terminating namespace
    // is refused with 403 and a NamespaceTerminating cause, which kubectl drain understands.
    api.check_namespace_for(&pods, ns, name)?;
    let opts = DeleteOpts::from_value(body.get("deleteOptions").unwrap_or(&Value::Null));
    let pod = api.get(&pods, ns, name)?;
    let pv = pod.value()?;
    let phase = pv
        .pointer("/status/phase")
        .and_then(|p| p.as_str())
        .unwrap_or_default();
    let deleting = pv
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|d| !d.is_null());
    if matches!(phase, "Succeeded" | "Failed" | "Pending") || deleting {
        // No budget protects these: deleted (a pending pod only if it did not change meanwhile).
        let mut o = opts.clone();
        if !matches!(phase, "Succeeded" | "Failed") && !deleting && o.rv.is_none() {
            o.rv = Some(pod.rv.to_string());
        }
        api.delete(&pods, ns, name, &o)?;
        return Ok(());
    }
    let Some((pdb_name, pdb)) = budget_of(api, &pdbs, ns, &pod)? else {
        if !opts.dry_run {
            mark_disruption_target(api, &pods, ns, name)?;
        }
        api.delete(&pods, ns, name, &opts)?;
        return Ok(());
    };
    if !pod_ready(&pv) && unhealthy_may_go(&pdb) {
        // Not counted as healthy: delete without touching the budget, but only if the pod did not
        // become ready meanwhile.
        let mut o = opts.clone();
        let had_rv = o.rv.is_some();
        if !had_rv {
            o.rv = Some(pod.rv.to_string());
        }
        return match api.delete(&pods, ns, name, &o) {
            Err(e) if e.code == 409 && !had_rv => Err(still_processing(&pdb_name)),
            r => r.map(|_| ()),
        };
    }
    if !opts.dry_run {
        api.mutate(&pdbs, ns, &pdb_name, |v| {
            check_and_decrement(v, &pdb_name, name)
        })?;
        mark_disruption_target(api, &pods, ns, name)?;
    } else {
        let mut copy = pdb.clone();
        check_and_decrement(&mut copy, &pdb_name, name)?;
    }
    api.delete(&pods, ns, name, &opts)?;
    Ok(())
}

/// An Eviction object, if it says its kind, says Eviction, and it names the pod of the URL.
fn check_eviction(name: &str, body: &Value) -> Result<(), ApiError> {
    if let Some(k) = body.get("kind").and_then(|k| k.as_str())
        && k != "Eviction"
    {
        return Err(ApiError::bad_request(format!("not a Eviction object: {k}")));
    }
    if body.pointer("/metadata/name").and_then(|n| n.as_str()) != Some(name) {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    Ok(())
}

/// The name and object of the PDB whose selector matches the pod, if one does; a 500 if more
/// than one does.
fn budget_of(
    api: &Api,
    pdbs: &ResourceDef,
    ns: &str,
    pod: &StoredObject,
) -> Result<Option<(String, Value)>, ApiError> {
    let filter = Filter {
        namespace: Some(ns.to_string()),
        ..Default::default()
    };
    let mut matching = Vec::new();
    for p in api.store.list(pdbs, &filter, None, 0).0 {
        let v = p.value()?;
        let sel = match v.pointer("/spec/selector").map(LabelSelector::from_object) {
            Some(Ok(s)) => s,
            _ => continue,
        };
        // An empty or missing selector matches nothing here (unlike the disruption controller).
        if sel.is_empty() || !sel.matches(&pod.labels) {
            continue;
        }
        matching.push(v);
    }
    if matching.len() > 1 {
        return Err(ApiError::new(
            500,
            "",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        ));
    }
    Ok(matching.pop().map(|pdb| {
        let name = pdb
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .unwrap_or_default()
            .to_string();
        (name, pdb)
    }))
}

/// An unready pod may go without touching budget `pdb`: its policy always allows it, or the
/// budget is met already.
fn unhealthy_may_go(pdb: &Value) -> bool {
    let num = |p: &str| pdb.pointer(p).and_then(|x| x.as_i64()).unwrap_or(0);
    let always_allow = pdb
        .pointer("/spec/unhealthyPodEvictionPolicy")
        .and_then(|x| x.as_str())
        == Some("AlwaysAllow");
    always_allow
        || (num("/status/currentHealthy") >= num("/status/desiredHealthy")
            && num("/status/desiredHealthy") > 0)
}

/// The condition the Eviction API puts on a pod it is about to delete (PodDisruptionConditions,
/// on by default since Kubernetes 1.31), so that its owner can tell an eviction from a crash.
fn mark_disruption_target(
    api: &Api,
    pods: &std::sync::Arc<crate::resources::ResourceDef>,
    ns: &str,
    name: &str,
) -> Result<(), ApiError> {
    api.mutate(pods, ns, name, |pod| {
        let condition = json!({
            "type": "DisruptionTarget", "status": "True", "lastProbeTime": null,
            "lastTransitionTime": now_rfc3339(),
            "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting",
        });
        let conditions = &mut pod["status"]["conditions"];
        if !conditions.is_array() {
            *conditions = json!([]);
        }
        let Some(list) = conditions.as_array_mut() else {
            return Ok(false);
        };
        list.retain(|c| c.get("type").and_then(Value::as_str) != Some("DisruptionTarget"));
        list.push(condition);
        Ok(true)
    })?;
    Ok(())
}

fn check_and_decrement(v: &mut Value, pdb: &str, pod: &str) -> Result<bool, ApiError> {
    let num = |p: &str| v.pointer(p).and_then(|x| x.as_i64()).unwrap_or(0);
    if num("/status/observedGeneration") < num("/metadata/generation") {
        return Err(still_processing(pdb));
    }
    let allowed = num("/status/disruptionsAllowed");
    if allowed < 0 {
        return Err(ApiError::forbidden(
            "policy",
            "poddisruptionbudget",
            pdb,
            "pdb disruptions allowed is negative",
        ));
    }
    if v.pointer("/status/disruptedPods")
        .and_then(|d| d.as_object())
        .map_or(0, |d| d.len())
        > MAX_DISRUPTED_POD_SIZE
    {
        return Err(ApiError::forbidden(
            "policy",
            "poddisruptionbudget",
            pdb,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        return Err(ApiError::too_many_requests(
            "Cannot evict pod as it would violate the pod's disruption budget.",
            0,
            vec![cause(
                "DisruptionBudget",
                &format!(
                    "The disruption budget {pdb} needs {} healthy pods and has {} currently",
                    num("/status/desiredHealthy"),
                    num("/status/currentHealthy")
                ),
                None,
            )],
        ));
    }
    let observed = num("/status/observedGeneration");
    v["status"]["disruptionsAllowed"] = json!(allowed - 1);
    if allowed - 1 == 0 {
        crate::pdb::set_condition(&mut v["status"], 0, observed);
    }
    if !v["status"]
        .get("disruptedPods")
        .is_some_and(|d| d.is_object())
    {
        v["status"]["disruptedPods"] = json!({});
    }
    v["status"]["disruptedPods"][pod] = json!(now_rfc3339());
    Ok(true)
}

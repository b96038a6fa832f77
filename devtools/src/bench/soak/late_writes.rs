//! Late writes across a handover: the soak holds the writes a leader sends in the moment
//! before it is killed, and the simulator delivers them well after its successor took over
//! (`FaultRule::delivered_late`), as a network delay or a stopped process would. Each write is
//! judged when it takes effect (the simulator's outcome hook): one that lands on an object
//! another replica wrote after the late one was sent has undone that replica's write. For the
//! writes that could (a NodeMaintenance's status or finalizers, a Node, a node lease) that must
//! never happen: nmo's writes are conditional on what their writer saw. The others (events,
//! evictions, pod deletions, creates) are counted, not judged: see docs/safety.md for why they
//! are harmless.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use nmo_sim::Served;

use super::violations::Violations;

/// What the late writes did.
#[derive(Debug, Clone, Default)]
pub struct LateWriteFindings {
    /// Late writes that landed on an object another replica wrote after they were sent.
    pub landed_over_another: Violations,
    /// Late writes the API server refused (their condition no longer held).
    pub refused: u64,
    /// Late writes that landed without undoing anyone's (nothing written since, or a kind of
    /// write that cannot undo another: an event, an eviction, a create).
    pub landed_harmlessly: u64,
}

/// An object, as `(resource/subresource, namespace, name)`.
type ObjectKey = (String, String, String);

/// The judge of late writes.
#[derive(Clone, Default)]
pub struct LateWrites {
    /// The last successful write of each guarded object: by which replica (user), when.
    last_write: Arc<Mutex<HashMap<ObjectKey, (String, Instant)>>>,
    findings: Arc<Mutex<LateWriteFindings>>,
    /// The namespace of the leader election's lease (its writes are the election's own).
    leader_namespace: String,
}

/// The objects a late write could undo someone else's write on.
fn guarded(served: &Served<'_>, leader_namespace: &str) -> Option<ObjectKey> {
    let key = served.key;
    let write = matches!(key.verb.as_str(), "update" | "patch" | "delete");
    let resource = key.resource.as_str();
    let guarded = match resource {
        "nodemaintenances" | "nodes" => true,
        "leases" => served.namespace != leader_namespace,
        _ => false,
    };
    (write && guarded && !served.name.is_empty()).then(|| {
        // A NodeMaintenance's status and its finalizers are one object: both are written by
        // the maintenance's driver.
        (
            resource.to_string(),
            served.namespace.to_string(),
            served.name.to_string(),
        )
    })
}

impl LateWrites {
    /// A judge for replicas electing their leader in `leader_namespace`.
    pub fn new(leader_namespace: &str) -> Self {
        LateWrites {
            leader_namespace: leader_namespace.to_string(),
            ..LateWrites::default()
        }
    }

    /// What was found so far.
    pub fn findings(&self) -> LateWriteFindings {
        self.findings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A write of `replica` took effect with `status` (the outcome hook).
    pub fn served(&self, served: &Served<'_>, status: u16, replica: &str) {
        let landed = (200..300).contains(&status);
        let object = guarded(served, &self.leader_namespace);
        let now = Instant::now();
        let mut last = self
            .last_write
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if served.late {
            let sent = now.checked_sub(served.delay).unwrap_or(now);
            let mut findings = self.findings.lock().unwrap_or_else(PoisonError::into_inner);
            let over = object
                .as_ref()
                .and_then(|object| last.get(object))
                .filter(|(writer, at)| writer.as_str() != replica && *at > sent);
            match (landed, over) {
                (false, _) => findings.refused += 1,
                (true, Some((writer, _))) => findings.landed_over_another.add(format!(
                    "{} {}{} {}/{} by {replica}, {:.1} s after it was sent, over a write of {writer}",
                    served.key.verb,
                    served.key.resource,
                    if served.key.subresource.is_empty() {
                        String::new()
                    } else {
                        format!("/{}", served.key.subresource)
                    },
                    served.namespace,
                    served.name,
                    served.delay.as_secs_f64(),
                )),
                (true, None) => findings.landed_harmlessly += 1,
            }
        }
        if landed && let Some(object) = object {
            last.insert(object, (replica.to_string(), now));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Api, Patch, PatchParams};
    use nmo_sim::{FaultRule, Scenario};
    use serde_json::json;

    use super::super::audit::tests::two_replicas;

    /// A write held across another replica's write that lands over it is caught; one refused
    /// by its condition is only counted; a write to a node another operator holds the lease
    /// of is caught too.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_late_write_over_another_replicas_is_caught() {
        let (sim, audit, a, b) = two_replicas(Scenario::plain(2, 0)).await;
        let (a, b) = (Api::<Node>::all(a), Api::<Node>::all(b));
        sim.faults().add(
            FaultRule::on(Some("patch"), Some("nodes"))
                .user("nmo-a")
                .delivered_late(Duration::from_millis(500), 1.0)
                .times(2),
        );
        let label = |value: &str| Patch::Merge(json!({"metadata": {"labels": {"who": value}}}));
        let held = tokio::spawn({
            let a = a.clone();
            async move {
                a.patch("node-0", &PatchParams::default(), &label("a"))
                    .await
            }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        b.patch("node-0", &PatchParams::default(), &label("b"))
            .await
            .expect("b's write");
        held.await
            .expect("the task")
            .expect("a's write lands, unconditional");
        // A conditional write, held likewise, is refused.
        let stale: json_patch::Patch = serde_json::from_value(json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
            {"op": "add", "path": "/metadata/labels/who", "value": "a"},
        ]))
        .expect("a patch");
        assert!(
            a.patch("node-0", &PatchParams::default(), &Patch::<()>::Json(stale))
                .await
                .is_err()
        );
        audit.foreign_lease("node-1", true);
        b.patch("node-1", &PatchParams::default(), &label("b"))
            .await
            .expect("b's write");
        let late = audit.late_writes();
        assert_eq!(late.landed_over_another.count, 1, "{late:?}");
        assert_eq!(late.refused, 1, "{late:?}");
        assert_eq!(audit.findings().foreign_leases_taken.count, 1);
        sim.set_audit_hook(None);
        sim.set_outcome_hook(None);
        sim.shutdown().await;
    }
}

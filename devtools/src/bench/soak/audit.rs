//! What the soak checks at the instant each request of a replica takes effect (the simulator's
//! audit hook): a write by a replica that does not hold the leader lease at that moment, an
//! eviction or deletion of a DaemonSet or mirror pod, a pod deleted while a budget that covers
//! it allows no disruption, and a node lease taken (or its node touched) while another
//! operator holds it with its clock ahead of nmo's. Writes held across a handover are judged
//! when they land (`late_writes`, through the simulator's outcome hook).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use nmo_sim::Served;
use nmo_sim::selectors::LabelSelector;
use serde_json::Value;

use nmo::leader::LEADER_ELECTION_ID;

use super::late_writes::{LateWriteFindings, LateWrites};
use super::violations::Violations;

/// What the audit found so far.
#[derive(Debug, Clone, Default)]
pub struct Findings {
    /// Writes by a replica while another held (or nobody held) the leader lease.
    pub writes_without_leadership: Violations,
    /// Evictions or deletions of DaemonSet-managed or mirror pods.
    pub daemonset_or_mirror_pods_removed: Violations,
    /// Pods deleted (not evicted) while a budget covering them allowed no disruption.
    pub protected_pods_deleted: Violations,
    /// Writes of a node lease another operator holds (renewed ahead of nmo's clock), or of
    /// the node it holds.
    pub foreign_leases_taken: Violations,
    /// Writes by each replica (user), for the figures.
    pub writes_by_replica: BTreeMap<String, u64>,
}

/// The audit: the replicas' users and the leader election identity prefix of the process
/// that runs as each now.
#[derive(Clone)]
pub struct Audit {
    /// user -> identity prefix (`<HOSTNAME>_`) of its current process.
    replicas: Arc<Mutex<BTreeMap<String, String>>>,
    /// Namespace of the leader election lease.
    leader_namespace: String,
    findings: Arc<Mutex<Findings>>,
    /// Nodes whose lease another operator holds now, renewed ahead of nmo's clock.
    foreign_held: Arc<Mutex<BTreeSet<String>>>,
    /// The judge of writes held across a handover.
    late: LateWrites,
}

fn is_write(verb: &str) -> bool {
    matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

fn owner_kind(pod: &Value) -> Option<&str> {
    pod.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|o| o["controller"].as_bool() == Some(true))
        .and_then(|o| o["kind"].as_str())
}

fn owner_field<'a>(pod: &'a Value, field: &str) -> Option<&'a str> {
    pod.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|o| o["controller"].as_bool() == Some(true))
        .and_then(|o| o[field].as_str())
}

fn is_mirror(pod: &Value) -> bool {
    pod.pointer("/metadata/annotations/kubernetes.io~1config.mirror")
        .is_some()
}

fn is_finished(pod: &Value) -> bool {
    matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    )
}

fn labels(pod: &Value) -> Vec<(String, String)> {
    pod.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

impl Audit {
    /// An audit of replicas electing their leader in `leader_namespace`.
    pub fn new(leader_namespace: &str) -> Self {
        Audit {
            replicas: Arc::default(),
            leader_namespace: leader_namespace.to_string(),
            findings: Arc::default(),
            foreign_held: Arc::default(),
            late: LateWrites::new(leader_namespace),
        }
    }

    /// Another operator holds `node`'s lease now (`true`), or no longer (`false`).
    pub fn foreign_lease(&self, node: &str, held: bool) {
        let mut nodes = self
            .foreign_held
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if held {
            nodes.insert(node.to_string());
        } else {
            nodes.remove(node);
        }
    }

    /// What the writes held across a handover did.
    pub fn late_writes(&self) -> LateWriteFindings {
        self.late.findings()
    }

    /// The outcome hook for the simulator (judges writes held across a handover).
    pub fn outcome_hook(&self) -> nmo_sim::OutcomeHook {
        let audit = self.clone();
        Arc::new(move |served: &Served<'_>, status: u16| {
            let replica = served.key.user.clone();
            let is_replica = audit
                .replicas
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains_key(&replica);
            if is_replica && is_write(&served.key.verb) {
                audit.late.served(served, status, &replica);
            }
        })
    }

    /// The replica `user` now runs as a process with HOSTNAME `host` (each process has its own,
    /// so a write of a restarted replica is never taken for its predecessor's).
    pub fn started(&self, user: &str, host: &str) {
        self.replicas
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(user.to_string(), format!("{host}_"));
    }

    /// What was found so far.
    pub fn findings(&self) -> Findings {
        self.findings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The hook for the simulator.
    pub fn hook(&self) -> nmo_sim::AuditHook {
        let audit = self.clone();
        Arc::new(move |served: &Served<'_>| audit.check(served))
    }

    fn check(&self, served: &Served<'_>) {
        // Over 80 lines: one request judged against every rule in turn (leader-only writes, foreign
        // leases, then a pod's eviction or deletion), each rule a few lines; the early returns say
        // which request a rule is about, and split they would be repeated in every piece.
        let key = served.key;
        let Some(identity) = self
            .replicas
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key.user)
            .cloned()
        else {
            return;
        };
        if !is_write(&key.verb) {
            return;
        }
        let what = || {
            format!(
                "{} {} {}{}/{} by {}",
                key.verb,
                key.resource,
                if key.subresource.is_empty() {
                    String::new()
                } else {
                    format!("({}) ", key.subresource)
                },
                served.namespace,
                served.name,
                key.user
            )
        };
        let mut findings = self.findings.lock().unwrap_or_else(PoisonError::into_inner);
        *findings
            .writes_by_replica
            .entry(key.user.clone())
            .or_default() += 1;
        // The election itself (its lease is created through the collection, without a name).
        let election = key.resource == "leases"
            && served.namespace == self.leader_namespace
            && (served.name == LEADER_ELECTION_ID || served.name.is_empty());
        let foreign_held = |node: &str| {
            self.foreign_held
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(node)
        };
        let lease_of = served.name.strip_prefix("node-").filter(|_| {
            key.resource == "leases"
                && served.namespace == nmo_actors::config::defaults::LEASE_NAMESPACE
        });
        let touched = match key.resource.as_str() {
            "leases" => lease_of.filter(|_| key.verb != "create"),
            "nodes" => Some(served.name),
            _ => None,
        };
        if touched.is_some_and(foreign_held) {
            findings
                .foreign_leases_taken
                .add(format!("{} while another operator held its lease", what()));
        }
        // Judged when it lands (`late_writes`): it was sent in time.
        if !election && !served.late {
            let holder = served
                .get_json(
                    "coordination.k8s.io",
                    "leases",
                    &self.leader_namespace,
                    LEADER_ELECTION_ID,
                )
                .and_then(|lease| {
                    lease
                        .pointer("/spec/holderIdentity")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .unwrap_or_default();
            if !holder.starts_with(identity.as_str()) {
                findings
                    .writes_without_leadership
                    .add(format!("{} while {holder:?} led", what()));
            }
        }
        if key.resource != "pods" {
            return;
        }
        let Some(pod) = served.get_json("", "pods", served.namespace, served.name) else {
            return;
        };
        let evicting = key.verb == "create" && key.subresource == "eviction";
        let deleting = key.verb == "delete" && key.subresource.is_empty();
        if !(evicting || deleting) {
            return;
        }
        let daemonset = owner_kind(&pod) == Some("DaemonSet");
        // Its DaemonSet is gone: none of that name, or one of that name created again (another
        // uid).
        let orphan = daemonset
            && owner_field(&pod, "name").is_some_and(|ds| {
                let current = served.get_json("apps", "daemonsets", served.namespace, ds);
                let uid = current
                    .as_ref()
                    .and_then(|d| d.pointer("/metadata/uid"))
                    .and_then(Value::as_str);
                uid.is_none() || uid != owner_field(&pod, "uid")
            });
        if is_mirror(&pod) || (daemonset && !orphan) {
            findings.daemonset_or_mirror_pods_removed.add(what());
        }
        if deleting && !is_finished(&pod) {
            let pod_labels = labels(&pod);
            let blocked_by = served
                .list_json("policy", "poddisruptionbudgets", served.namespace)
                .into_iter()
                .find(|pdb| {
                    let covers = pdb
                        .pointer("/spec/selector")
                        .and_then(|s| LabelSelector::from_object(s).ok())
                        .is_some_and(|s| s.matches(&pod_labels));
                    let allowed = pdb
                        .pointer("/status/disruptionsAllowed")
                        .and_then(Value::as_i64)
                        .unwrap_or(0);
                    covers && allowed == 0
                });
            if let Some(pdb) = blocked_by {
                let name = pdb
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                findings
                    .protected_pods_deleted
                    .add(format!("{} while budget {name} allowed none", what()));
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::{Node, Pod};
    use kube::api::{Api, DeleteParams, EvictParams, Patch, PatchParams};
    use nmo_sim::{ClientOptions, Scenario, SimConfig, Simulator};
    use serde_json::json;

    use super::*;

    /// A simulator of `scenario` audited for two replicas, `nmo-a` and `nmo-b`, with a client
    /// for each.
    pub(in super::super) async fn two_replicas(
        scenario: Scenario,
    ) -> (nmo_sim::SimHandle, Audit, kube::Client, kube::Client) {
        let config = SimConfig::default()
            .scenario(scenario)
            .token("token-a", "nmo-a")
            .token("token-b", "nmo-b")
            .time_scale(0.0);
        let sim = Simulator::start(config)
            .await
            .expect("the simulator starts");
        let audit = Audit::new("default");
        audit.started("nmo-a", "soak-a-1");
        audit.started("nmo-b", "soak-b-1");
        sim.set_audit_hook(Some(audit.hook()));
        sim.set_outcome_hook(Some(audit.outcome_hook()));
        let client = |token: &str| {
            sim.kube_client_with(&ClientOptions {
                token: Some(token.into()),
                ..ClientOptions::default()
            })
            .expect("a client")
        };
        let (a, b) = (client("token-a"), client("token-b"));
        (sim, audit, a, b)
    }

    fn pod_named(pods: &[Value], pick: impl Fn(&Value) -> bool) -> (String, String) {
        let pod = pods.iter().find(|p| pick(p)).expect("such a pod");
        let meta = |f: &str| pod["metadata"][f].as_str().unwrap_or_default().to_string();
        (meta("namespace"), meta("name"))
    }

    /// Each check can fail: a write of a replica that does not lead, an eviction of a
    /// DaemonSet and of a mirror pod, and a deletion of a pod whose budget allows nothing are
    /// all caught; the leader's ordinary writes are not.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_kind_of_violation_is_caught() {
        let (sim, audit, a, b) = two_replicas(Scenario::new(2, 4)).await;
        sim.create_json(
            "coordination.k8s.io",
            "leases",
            "default",
            json!({"metadata": {"name": LEADER_ELECTION_ID},
                   "spec": {"holderIdentity": "soak-b-1_0123", "leaseDurationSeconds": 8}}),
            false,
        )
        .expect("the leader lease");
        let cordon = Patch::Merge(json!({"spec": {"unschedulable": true}}));
        Api::<Node>::all(a)
            .patch("node-0", &PatchParams::default(), &cordon)
            .await
            .expect("the simulator takes it");
        Api::<Node>::all(b.clone())
            .patch("node-1", &PatchParams::default(), &cordon)
            .await
            .expect("the leader's write");

        let pods = sim.list_json("", "pods", "");
        let (ns, daemonset_pod) = pod_named(&pods, |p| {
            p["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
        });
        let _ = Api::<Pod>::namespaced(b.clone(), &ns)
            .evict(&daemonset_pod, &EvictParams::default())
            .await;
        let (ns, mirror_pod) = pod_named(&pods, |p| {
            p["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_string()
        });
        let _ = Api::<Pod>::namespaced(b.clone(), &ns)
            .evict(&mirror_pod, &EvictParams::default())
            .await;

        // A budget that allows no disruption over one ReplicaSet pod.
        let (ns, guarded) = pod_named(&pods, |p| {
            p["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
        });
        let guarded_pod = sim.get_json("", "pods", &ns, &guarded).expect("the pod");
        let app = guarded_pod["metadata"]["labels"]["app"].clone();
        sim.create_json(
            "policy",
            "poddisruptionbudgets",
            &ns,
            json!({"metadata": {"name": "guard"},
                   "spec": {"minAvailable": 1000, "selector": {"matchLabels": {"app": app}}}}),
            false,
        )
        .expect("the budget");
        let allows_none = || {
            sim.get_json("policy", "poddisruptionbudgets", &ns, "guard")
                .and_then(|p| {
                    p.pointer("/status/disruptionsAllowed")
                        .and_then(Value::as_i64)
                })
                == Some(0)
        };
        for _ in 0..100 {
            if allows_none() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            allows_none(),
            "the disruption controller computed the budget"
        );
        Api::<Pod>::namespaced(b, &ns)
            .delete(&guarded, &DeleteParams::default())
            .await
            .expect("the simulator deletes it");

        let found = audit.findings();
        assert_eq!(found.writes_without_leadership.count, 1, "{found:?}");
        assert!(found.writes_without_leadership.examples[0].contains("nodes"));
        assert_eq!(found.daemonset_or_mirror_pods_removed.count, 2, "{found:?}");
        assert_eq!(found.protected_pods_deleted.count, 1, "{found:?}");
        sim.set_audit_hook(None);
        sim.set_outcome_hook(None);
        sim.shutdown().await;
    }
}

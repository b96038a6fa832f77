//! The classes of blocked drains, their reasons (condition reasons, metric labels) and messages.

use std::fmt;

use chrono::{DateTime, Utc};

use crate::model::{ConditionStatus, MaintenanceName, NodeName, PodRef};
use crate::pdb::Structural;

/// A maintenance cordoning a node that a replacement would fit.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cordoned {
    /// The NodeMaintenance.
    pub maintenance: MaintenanceName,
    /// Its node.
    pub node: NodeName,
}

/// Why a pod's eviction cannot happen now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocker {
    /// The PDB waits for one of its pods (usually the replacement of an evicted one) to
    /// become ready: transient.
    WaitingForReplacement {
        /// The PDB.
        pdb: String,
        /// The pod it waits for, when one was found.
        replacement: Option<PodRef>,
        /// `status.currentHealthy`.
        healthy: i32,
        /// `status.desiredHealthy`.
        desired: i32,
    },
    /// The pod the PDB waits for cannot be scheduled.
    ReplacementUnschedulable {
        /// The PDB.
        pdb: String,
        /// The pod.
        replacement: PodRef,
        /// The scheduler's words, or what else keeps it off every node.
        why: String,
    },
    /// The pod the PDB waits for would fit only nodes cordoned by other maintenances, which
    /// may well wait for this one: none can finish until a person steps in.
    CrossNodeDeadlock {
        /// The PDB.
        pdb: String,
        /// The pod.
        replacement: PodRef,
        /// The maintenances whose nodes it would fit.
        maintenances: Vec<Cordoned>,
    },
    /// The PDB can never allow a disruption as it stands.
    StructuralBudget {
        /// The PDB.
        pdb: String,
        /// Why.
        why: Structural,
    },
    /// More than one PDB selects the pod: the Eviction API refuses it.
    MultipleBudgets {
        /// The PDBs, when known.
        pdbs: Vec<String>,
    },
    /// The PDB allows no disruption now and nothing more is known yet (its status is stale
    /// or not watched).
    BudgetExhausted {
        /// The PDB, when known.
        pdb: Option<String>,
        /// The API's or the PDB's numbers.
        message: String,
    },
    /// Something acts on the eviction request (an admission webhook on `pods/eviction`, or
    /// KubeVirt for a launcher pod): the request was refused, by the webhook or by the budget
    /// after the webhook let it through, and the pod is asked again until it leaves.
    EvictionIntercepted {
        /// Who sees the request: the webhooks' names, or KubeVirt.
        by: String,
        /// The refusal's own words (the webhook's message, or the budget's).
        message: String,
    },
    /// A KubeVirt VM is live-migrating away (or is marked for it): its launcher pod leaves when
    /// the migration completes. Progress, not an obstacle.
    VmMigrating {
        /// The VMI, `namespace/name`.
        vm: String,
        /// The node it migrates to (None: marked, not started yet).
        target: Option<String>,
        /// Since when.
        since: Option<DateTime<Utc>>,
        /// Its domain is ready on the target (the switch-over is next).
        target_ready: bool,
    },
    /// A KubeVirt VM that must live-migrate cannot: KubeVirt refuses its eviction.
    VmCannotMigrate {
        /// The VMI, `namespace/name`.
        vm: String,
        /// KubeVirt's reason.
        why: String,
    },
    /// The node's `Ready` condition is `False` or `Unknown`, and pods on it are terminating: no
    /// kubelet is there to finish them, so they never go. Nothing is force-deleted.
    NodeNotReady {
        /// The node.
        node: String,
        /// Its `Ready` condition's status (`False`, `Unknown`).
        status: ConditionStatus,
        /// The condition's reason.
        reason: Option<String>,
        /// Since when.
        since: Option<DateTime<Utc>>,
        /// The pods stuck terminating there.
        pods: Vec<PodRef>,
    },
}

impl Blocker {
    /// The class, as the `DrainBlocked` condition's reason and the metric's label.
    pub fn reason(&self) -> &'static str {
        match self {
            Blocker::WaitingForReplacement { .. } => "WaitingForReplacement",
            Blocker::ReplacementUnschedulable { .. } => "ReplacementUnschedulable",
            Blocker::CrossNodeDeadlock { .. } => "CrossNodeDeadlock",
            Blocker::StructuralBudget { .. } => "StructuralBudget",
            Blocker::MultipleBudgets { .. } => "MultipleBudgets",
            Blocker::BudgetExhausted { .. } => "BudgetExhausted",
            Blocker::EvictionIntercepted { .. } => "EvictionIntercepted",
            Blocker::NodeNotReady { .. } => "NodeNotReady",
            Blocker::VmMigrating { .. } => "LiveMigrating",
            Blocker::VmCannotMigrate { .. } => "VmCannotMigrate",
        }
    }

    /// Every class reason, for metrics that list them all.
    pub const REASONS: [&'static str; 10] = [
        "WaitingForReplacement",
        "ReplacementUnschedulable",
        "CrossNodeDeadlock",
        "StructuralBudget",
        "MultipleBudgets",
        "BudgetExhausted",
        "EvictionIntercepted",
        "NodeNotReady",
        "LiveMigrating",
        "VmCannotMigrate",
    ];

    /// How much a person is needed: the maintenance as a whole shows its pods' most severe
    /// blocker (a deadlock or a structural PDB never resolves by waiting).
    pub fn severity(&self) -> u8 {
        match self {
            Blocker::CrossNodeDeadlock { .. } | Blocker::NodeNotReady { .. } => 5,
            Blocker::StructuralBudget { .. } | Blocker::VmCannotMigrate { .. } => 4,
            Blocker::MultipleBudgets { .. } => 3,
            Blocker::ReplacementUnschedulable { .. } => 2,
            Blocker::WaitingForReplacement { .. }
            | Blocker::EvictionIntercepted { .. }
            | Blocker::VmMigrating { .. } => 1,
            Blocker::BudgetExhausted { .. } => 0,
        }
    }

    /// Whether waiting alone may end it.
    pub fn needs_a_person(&self) -> bool {
        self.severity() >= 2
    }

    /// The PDB concerned, when one is.
    pub fn pdb(&self) -> Option<&str> {
        match self {
            Blocker::WaitingForReplacement { pdb, .. }
            | Blocker::ReplacementUnschedulable { pdb, .. }
            | Blocker::CrossNodeDeadlock { pdb, .. }
            | Blocker::StructuralBudget { pdb, .. } => Some(pdb),
            Blocker::BudgetExhausted { pdb, .. } => pdb.as_deref(),
            Blocker::MultipleBudgets { .. }
            | Blocker::EvictionIntercepted { .. }
            | Blocker::NodeNotReady { .. }
            | Blocker::VmMigrating { .. }
            | Blocker::VmCannotMigrate { .. } => None,
        }
    }

    /// The blocker as maintenance `own` sees it: a deadlock lists only the OTHER maintenances;
    /// a replacement that fits only `own`'s node is unschedulable because of this very
    /// maintenance, which no other maintenance can change.
    pub fn seen_by(self, own: &str) -> Blocker {
        match self {
            Blocker::CrossNodeDeadlock {
                pdb,
                replacement,
                maintenances,
            } => {
                let (mine, others): (Vec<Cordoned>, Vec<Cordoned>) =
                    maintenances.into_iter().partition(|c| c.maintenance == own);
                if others.is_empty() {
                    let node = mine.first().map(|c| c.node.clone()).unwrap_or_default();
                    Blocker::ReplacementUnschedulable {
                        pdb,
                        replacement,
                        why: format!("it fits only node {node}, which this maintenance cordons"),
                    }
                } else {
                    Blocker::CrossNodeDeadlock {
                        pdb,
                        replacement,
                        maintenances: others,
                    }
                }
            }
            other => other,
        }
    }
}

fn rfc3339(at: &DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn pod_name(pod: &PodRef) -> String {
    format!("{}/{}", pod.namespace, pod.name)
}

impl fmt::Display for Blocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Over 80 lines: one arm per kind of blocker, each its own sentence.
        match self {
            Blocker::WaitingForReplacement {
                pdb,
                replacement,
                healthy,
                desired,
            } => {
                write!(
                    f,
                    "PodDisruptionBudget {pdb} allows no disruption ({healthy} healthy, {desired} needed): "
                )?;
                match replacement {
                    Some(pod) => write!(f, "waiting for pod {} to become ready", pod_name(pod)),
                    None => f.write_str("waiting for a replacement pod to be created and become ready"),
                }
            }
            Blocker::ReplacementUnschedulable {
                pdb,
                replacement,
                why,
            } => write!(
                f,
                "PodDisruptionBudget {pdb} waits for pod {}, which cannot be scheduled: {why}",
                pod_name(replacement)
            ),
            Blocker::CrossNodeDeadlock {
                pdb,
                replacement,
                maintenances,
            } => {
                let names: Vec<String> = maintenances
                    .iter()
                    .map(|c| format!("{} (node {})", c.maintenance, c.node))
                    .collect();
                write!(
                    f,
                    "cross-node deadlock: PodDisruptionBudget {pdb} waits for pod {}, which fits only nodes cordoned by other maintenances: {}; end one of them or relax the budget",
                    pod_name(replacement),
                    names.join(", ")
                )
            }
            Blocker::StructuralBudget { pdb, why } => {
                write!(f, "PodDisruptionBudget {pdb} can never allow a disruption: {why}")
            }
            Blocker::MultipleBudgets { pdbs } if pdbs.is_empty() => f.write_str(
                "the pod has more than one PodDisruptionBudget, which the Eviction API does not support",
            ),
            Blocker::MultipleBudgets { pdbs } => write!(
                f,
                "the pod has more than one PodDisruptionBudget ({}), which the Eviction API does not support",
                pdbs.join(", ")
            ),
            Blocker::BudgetExhausted { pdb, message } => match pdb {
                Some(pdb) => write!(
                    f,
                    "PodDisruptionBudget {pdb} allows no disruption now: {message}"
                ),
                None => write!(f, "a PodDisruptionBudget allows no disruption now: {message}"),
            },
            Blocker::EvictionIntercepted { by, message } => write!(
                f,
                "the eviction request is handed to {by}, which acts on it; asked again until the pod leaves: {message}"
            ),
            Blocker::VmMigrating {
                vm,
                target: Some(target),
                since,
                target_ready,
            } => {
                write!(f, "VM {vm} is live-migrating to node {target}")?;
                if let Some(since) = since {
                    write!(f, " since {}", rfc3339(since))?;
                }
                if *target_ready {
                    f.write_str(", its domain is ready on the target")?;
                }
                f.write_str("; its launcher pod leaves when the migration completes")
            }
            Blocker::VmMigrating { vm, .. } => write!(
                f,
                "VM {vm} is marked for evacuation; waiting for KubeVirt to start its live migration"
            ),
            Blocker::VmCannotMigrate { vm, why } => write!(
                f,
                "VM {vm} cannot live-migrate: {why}; KubeVirt refuses its eviction until it can (make it migratable, change its evictionStrategy, or stop it)"
            ),
            Blocker::NodeNotReady {
                node,
                status,
                reason,
                since,
                pods,
            } => {
                write!(f, "node {node} is not Ready (Ready={status}")?;
                if let Some(reason) = reason {
                    write!(f, ", {reason}")?;
                }
                if let Some(since) = since {
                    write!(f, ", since {}", rfc3339(since))?;
                }
                let names: Vec<String> = pods.iter().map(pod_name).collect();
                write!(
                    f,
                    "): no kubelet finishes its terminating pods ({}); nmo force-deletes nothing: bring the node back, or once it is known to be down for good delete them with kubectl delete pod --force --grace-period=0",
                    names.join(", ")
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> PodRef {
        PodRef {
            namespace: "app".into(),
            name: name.into(),
        }
    }

    fn cordoned(nm: &str, node: &str) -> Cordoned {
        Cordoned {
            maintenance: nm.into(),
            node: node.into(),
        }
    }

    fn deadlock(maintenances: Vec<Cordoned>) -> Blocker {
        Blocker::CrossNodeDeadlock {
            pdb: "web".into(),
            replacement: pod("web-x"),
            maintenances,
        }
    }

    #[test]
    fn a_deadlock_names_the_other_maintenances_only() {
        let seen = deadlock(vec![cordoned("nm-0", "n0"), cordoned("nm-1", "n1")]).seen_by("nm-0");
        assert_eq!(seen, deadlock(vec![cordoned("nm-1", "n1")]));
        assert_eq!(
            seen.to_string(),
            "cross-node deadlock: PodDisruptionBudget web waits for pod app/web-x, which fits only nodes cordoned by other maintenances: nm-1 (node n1); end one of them or relax the budget"
        );
    }

    #[test]
    fn a_replacement_that_fits_only_the_own_node_is_unschedulable() {
        let seen = deadlock(vec![cordoned("nm-0", "n0")]).seen_by("nm-0");
        assert_eq!(seen.reason(), "ReplacementUnschedulable");
        assert!(seen.to_string().contains("fits only node n0"), "{seen}");
    }

    #[test]
    fn severity_puts_what_needs_a_person_first() {
        let waiting = Blocker::WaitingForReplacement {
            pdb: "web".into(),
            replacement: Some(pod("web-x")),
            healthy: 2,
            desired: 2,
        };
        assert!(!waiting.needs_a_person());
        assert!(deadlock(vec![]).severity() > waiting.severity());
        assert_eq!(
            waiting.to_string(),
            "PodDisruptionBudget web allows no disruption (2 healthy, 2 needed): waiting for pod app/web-x to become ready"
        );
        let several = Blocker::MultipleBudgets {
            pdbs: vec!["a".into(), "b".into()],
        };
        assert!(
            several
                .to_string()
                .contains("more than one PodDisruptionBudget (a, b)")
        );
        assert_eq!(several.pdb(), None);
        assert_eq!(Blocker::REASONS.len(), 10);
    }
}

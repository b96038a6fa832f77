//! The plan itself: a pure function of what was read. Each pod is classified exactly as the
//! drain will (the actors' `classify`), each evicted pod gets its PDBs and their headroom,
//! and the blockers are predicted by rules simple enough to explain in one sentence each.

use std::collections::{BTreeMap, BTreeSet};

use nmo_actors::decisions::{PodAction, SkipReason, classify, daemonset_of};
use nmo_actors::model::PodPhase;
use nmo_actors::pdb::{Pdb, structural};

use super::interceptors;
use super::model::{
    Action, Blocker, NodeFacts, NodePlan, PdbHeadroom, Plan, PlanInput, PodFacts, PodPlan,
};
use crate::crd::{NodeMaintenance, NodeMaintenanceSpec};
use crate::webhook::rules::{self, EtcdGuard};

/// A pod with what the drain does with it and why.
type Classified<'a> = (&'a PodFacts, Action, String);

/// Makes the plan.
pub fn analyse(input: &PlanInput) -> Plan {
    let planned: BTreeSet<&str> = input.planned.iter().map(String::as_str).collect();
    let mut blockers = Vec::new();

    // What the drain does with each pod; the evicted ones are the PDBs' business.
    let mut classified: Vec<(&str, Vec<Classified<'_>>)> = Vec::new();
    for node in &input.planned {
        if !input.nodes.contains_key(node) {
            blockers.push(Blocker::NodeMissing { node: node.clone() });
        }
        let pods = input.pods.get(node).map(Vec::as_slice).unwrap_or_default();
        let pods = pods.iter().map(|pod| {
            let (action, why) = action(pod, input);
            (pod, action, why)
        });
        classified.push((node, pods.collect()));
    }
    let evicted: Vec<&PodFacts> = classified
        .iter()
        .flat_map(|(_, pods)| pods.iter())
        .filter(|(_, action, _)| *action == Action::Evict)
        .map(|(pod, _, _)| *pod)
        .collect();
    // Each PDB with its evicted pods on the planned nodes.
    let mut covered: BTreeMap<usize, Vec<&PodFacts>> = BTreeMap::new();
    for pod in &evicted {
        let matching: Vec<usize> = input
            .pdbs
            .iter()
            .enumerate()
            .filter(|(_, b)| b.selects(&pod.info.namespace, &pod.info.labels))
            .map(|(i, _)| i)
            .collect();
        if matching.len() > 1 {
            blockers.push(Blocker::SeveralBudgets {
                pod: pod_id(pod),
                pdbs: matching.iter().map(|i| input.pdbs[*i].key()).collect(),
            });
        }
        for i in matching {
            covered.entry(i).or_default().push(pod);
        }
    }
    blockers.extend(budget_blockers(input, &covered, &planned));
    blockers.extend(quorum(input));
    for pod in &evicted {
        if let Some(vm) = interceptors::vm_plan(&pod.info, &input.vms).filter(|vm| vm.blocked) {
            blockers.push(Blocker::VmCannotMigrate {
                vm: vm.name,
                migratable: vm.migratable.unwrap_or_default(),
            });
        }
    }

    let nodes = classified
        .into_iter()
        .map(|(node, pods)| NodePlan {
            node: node.to_string(),
            state: input
                .nodes
                .get(node)
                .map_or_else(|| "not found".to_string(), state),
            pods: pods
                .into_iter()
                .map(|(pod, action, why)| pod_plan(pod, action, why, input, &covered))
                .collect(),
        })
        .collect();
    Plan { nodes, blockers }
}

/// The PDBs that will hold the drain up: one that can never allow a disruption, or whose
/// evicted pods have nowhere to go. A PDB that something acting on evictions works behind
/// (KubeVirt's over a launcher pod, Strimzi's over its brokers) blocks nothing: nmo asks, the
/// interceptor acts.
fn budget_blockers(
    input: &PlanInput,
    covered: &BTreeMap<usize, Vec<&PodFacts>>,
    planned: &BTreeSet<&str>,
) -> Vec<Blocker> {
    let left = schedulable_left(&input.nodes, planned);
    let mut blockers = Vec::new();
    for (i, pods) in covered {
        let pdb = &input.pdbs[*i];
        let intercepted = pods
            .iter()
            .all(|p| !interceptors::interceptors(&input.eviction_webhooks, &p.info).is_empty());
        if intercepted {
            continue;
        }
        if let Some(why) = structural(pdb) {
            blockers.push(Blocker::StructuralBudget {
                pdb: pdb.key(),
                why: why.to_string(),
                pods: pods.iter().map(|p| pod_id(p)).collect(),
            });
        } else if let Some(why) = nowhere_to_go(pdb, pods, left, planned.len()) {
            blockers.push(Blocker::NowhereToGo {
                pdb: pdb.key(),
                why,
            });
        }
    }
    blockers
}

/// What the plan says of one pod: for an evicted one, its PDBs' headroom, who else sees its
/// eviction, and what that does to its VM.
fn pod_plan(
    pod: &PodFacts,
    action: Action,
    why: String,
    input: &PlanInput,
    covered: &BTreeMap<usize, Vec<&PodFacts>>,
) -> PodPlan {
    let evicted = action == Action::Evict;
    PodPlan {
        namespace: pod.info.namespace.to_string(),
        name: pod.info.name.to_string(),
        action,
        why,
        pdbs: if evicted {
            headroom(pod, input, covered)
        } else {
            Vec::new()
        },
        interceptors: if evicted {
            interceptors::interceptors(&input.eviction_webhooks, &pod.info)
        } else {
            Vec::new()
        },
        vm: evicted
            .then(|| interceptors::vm_plan(&pod.info, &input.vms))
            .flatten(),
    }
}

fn pod_id(pod: &PodFacts) -> String {
    format!("{}/{}", pod.info.namespace, pod.info.name)
}

fn state(node: &NodeFacts) -> String {
    let mut words = vec![if node.ready { "Ready" } else { "NotReady" }];
    if node.unschedulable {
        words.push("cordoned");
    }
    if node.tainted {
        words.push("tainted");
    }
    if node.control_plane {
        words.push("control plane");
    }
    words.join(", ")
}

/// What the drain does with a pod, and why, in the drain's own terms.
fn action(pod: &PodFacts, input: &PlanInput) -> (Action, String) {
    let daemonset = daemonset_of(&pod.info);
    let exists = daemonset.as_ref().map(|key| input.daemonsets.contains(key));
    let owner = pod
        .info
        .controller
        .as_ref()
        .map(|o| format!("{} {}", o.kind, o.name));
    match classify(&pod.info, exists) {
        PodAction::Evict => {
            let mut why = match (owner, &daemonset) {
                (_, Some((namespace, name))) => format!(
                    "orphan: its DaemonSet {namespace}/{name} is gone, so it is evicted (a \
                     budget covering it is honoured)"
                ),
                (Some(owner), None) => {
                    format!("owned by {owner}: evicted, then replaced elsewhere")
                }
                (None, None) => "no controller: evicted, and nothing recreates it".to_string(),
            };
            if pod.info.has_empty_dir {
                why.push_str("; its emptyDir data is lost");
            }
            (Action::Evict, why)
        }
        PodAction::Delete => {
            let why = match pod.info.phase {
                PodPhase::Succeeded | PodPhase::Failed => {
                    format!("finished ({:?}): deleted without eviction", pod.info.phase)
                }
                _ => "deleted".to_string(),
            };
            (Action::Delete, why)
        }
        PodAction::Wait => (Action::Wait, "already terminating: waited for".to_string()),
        PodAction::Skip(SkipReason::DaemonSet) => (
            Action::Skip,
            format!(
                "managed by {}: left alone (it would be recreated at once)",
                owner.unwrap_or_default()
            ),
        ),
        PodAction::Skip(SkipReason::Mirror) => (
            Action::Skip,
            "mirror (static) pod: the kubelet owns it, left alone".to_string(),
        ),
        // Every DaemonSet was looked up, so this is not reached; say so rather than guess.
        PodAction::CheckDaemonSet => (
            Action::Skip,
            "owned by a DaemonSet that could not be looked up".to_string(),
        ),
    }
}

fn headroom(
    pod: &PodFacts,
    input: &PlanInput,
    covered: &BTreeMap<usize, Vec<&PodFacts>>,
) -> Vec<PdbHeadroom> {
    input
        .pdbs
        .iter()
        .enumerate()
        .filter(|(_, b)| b.selects(&pod.info.namespace, &pod.info.labels))
        .map(|(i, b)| PdbHeadroom {
            pdb: b.key(),
            disruptions_allowed: disruptions_allowed(b),
            pods_on_planned_nodes: covered.get(&i).map_or(0, Vec::len),
        })
        .collect()
}

/// The disruptions `pdb` allows now (none before its controller wrote a status).
fn disruptions_allowed(pdb: &Pdb) -> i32 {
    pdb.status.as_ref().map_or(0, |s| s.disruptions_allowed)
}

/// Schedulable nodes outside the planned ones.
fn schedulable_left(nodes: &BTreeMap<String, NodeFacts>, planned: &BTreeSet<&str>) -> usize {
    nodes
        .values()
        .filter(|n| !planned.contains(n.name.as_str()) && n.schedulable())
        .count()
}

/// A PDB whose evictions must wait for replacements (it allows fewer than it has pods on
/// the planned nodes) while the replacements cannot start once those nodes are cordoned
/// together: no schedulable node is left, or its pods need a node each and too few are left.
fn nowhere_to_go(pdb: &Pdb, pods: &[&PodFacts], left: usize, planned: usize) -> Option<String> {
    let on_planned = pods.len();
    let allowed = usize::try_from(disruptions_allowed(pdb).max(0)).unwrap_or(0);
    if on_planned <= allowed {
        return None; // every eviction fits the PDB now: nothing waits for a replacement
    }
    let waiting = format!(
        "it allows {allowed} disruption(s) now and has {on_planned} pods on these nodes, so evictions wait for replacements to become healthy"
    );
    if left == 0 {
        return Some(format!(
            "{waiting}, but no schedulable node is left once these {planned} nodes are cordoned together"
        ));
    }
    let expected = pdb.status.as_ref().map_or(0, |status| {
        usize::try_from(status.expected_pods.max(0)).unwrap_or(0)
    });
    if pods.iter().any(|p| p.one_per_node) && expected > left {
        return Some(format!(
            "{waiting}, but its {expected} pods need a node each (required anti-affinity on kubernetes.io/hostname) and only {left} schedulable nodes are left once these {planned} nodes are cordoned together"
        ));
    }
    None
}

/// The webhook's control-plane rules, applied to the planned control-plane nodes as if their
/// NodeMaintenances were created in the order given.
fn quorum(input: &PlanInput) -> Vec<Blocker> {
    let control_plane: Vec<&str> = input
        .planned
        .iter()
        .map(String::as_str)
        .filter(|n| input.nodes.get(*n).is_some_and(|f| f.control_plane))
        .collect();
    let Some(first) = control_plane.first() else {
        return Vec::new();
    };
    let blocker = |node: &str, message: String| Blocker::Quorum {
        node: node.to_string(),
        message,
    };
    match rules::etcd_guard(first, &input.etcd_pdbs) {
        Err(denial) => vec![blocker(first, denial.message)],
        Ok(EtcdGuard::Allows) => {
            let allowed = guard_allows(input);
            control_plane
                .iter()
                .skip(allowed)
                .map(|node| {
                    blocker(
                        node,
                        format!(
                            "the etcd quorum guard allows {allowed} disruption(s), and {} control-plane nodes are planned together",
                            control_plane.len()
                        ),
                    )
                })
                .collect()
        }
        Ok(EtcdGuard::CheckGuardPods { .. }) => control_plane
            .iter()
            .filter_map(|node| {
                rules::guard_pods_allow(node, &input.guard_pods)
                    .err()
                    .map(|denial| blocker(node, denial.message))
            })
            .collect(),
        Ok(EtcdGuard::Absent) => {
            let names: BTreeSet<String> = input
                .nodes
                .values()
                .filter(|n| n.control_plane)
                .map(|n| n.name.clone())
                .collect();
            let mut existing = input.maintenances.clone();
            let mut out = Vec::new();
            for node in control_plane {
                if let Err(denial) =
                    rules::no_other_control_plane_in_maintenance(node, &existing, &names)
                {
                    out.push(blocker(node, denial.message));
                }
                existing.push(NodeMaintenance::new(
                    &format!("planned-{node}"),
                    NodeMaintenanceSpec {
                        node_name: node.to_string(),
                        reason: None,
                        drain_timeout: None,
                        on_drain_timeout: None,
                    },
                ));
            }
            out
        }
    }
}

fn guard_allows(input: &PlanInput) -> usize {
    input
        .etcd_pdbs
        .iter()
        .find(|pdb| {
            pdb.metadata
                .name
                .as_deref()
                .is_some_and(|n| rules::ETCD_GUARD_PDB_NAMES.contains(&n))
        })
        .and_then(|pdb| pdb.status.as_ref())
        .map_or(0, |s| {
            usize::try_from(s.disruptions_allowed.max(0)).unwrap_or(0)
        })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use nmo_actors::model::{OwnerRef, PodInfo};
    use nmo_actors::pdb::{IntOrPercent, LabelSelector, PdbStatus};

    use super::*;

    fn node(name: &str) -> NodeFacts {
        NodeFacts {
            name: name.into(),
            ready: true,
            ..NodeFacts::default()
        }
    }

    fn pod(name: &str, app: &str) -> PodFacts {
        let mut info =
            PodInfo::test("shop", name).controlled_by("ReplicaSet", &format!("{app}-rs"));
        info.labels = std::sync::Arc::new([("app".to_string(), app.to_string())].into());
        PodFacts {
            info,
            one_per_node: false,
        }
    }

    /// PDB `shop/<name>` over `app=<app>`, `maxUnavailable: 1`, with the status the
    /// disruption controller writes for `expected` pods allowing `allowed` disruptions.
    fn pdb(name: &str, app: &str, allowed: i32, expected: i32) -> Pdb {
        Pdb {
            namespace: "shop".into(),
            name: name.into(),
            generation: 1,
            selector: Some(LabelSelector::labels([("app", app)])),
            min_available: None,
            max_unavailable: Some(IntOrPercent::Int(1)),
            always_allow_unhealthy: false,
            status: Some(PdbStatus {
                observed_generation: 1,
                disruptions_allowed: allowed,
                current_healthy: expected - 1 + allowed,
                desired_healthy: expected - 1,
                expected_pods: expected,
                ..PdbStatus::default()
            }),
        }
    }

    /// Nodes n0..n<count>, planned: the first `planned`, each with one `web` pod.
    fn cluster(count: usize, planned: usize) -> PlanInput {
        let mut input = PlanInput::default();
        for i in 0..count {
            let name = format!("n{i}");
            input.nodes.insert(name.clone(), node(&name));
            if i < planned {
                input.planned.push(name.clone());
                input
                    .pods
                    .insert(name, vec![pod(&format!("web-{i}"), "web")]);
            }
        }
        input
    }

    #[test]
    fn a_pdb_with_room_and_nodes_left_blocks_nothing() {
        let mut input = cluster(4, 2);
        input.pdbs.push(pdb("web", "web", 1, 4));
        let plan = analyse(&input);
        assert!(plan.clear(), "{:?}", plan.blockers);
        let web = &plan.nodes[0].pods[0];
        assert_eq!(web.action, Action::Evict);
        assert_eq!(
            web.pdbs,
            [PdbHeadroom {
                pdb: "shop/web".into(),
                disruptions_allowed: 1,
                pods_on_planned_nodes: 2
            }]
        );
        assert!(web.why.contains("ReplicaSet web-rs"), "{}", web.why);
    }

    #[test]
    fn a_structural_pdb_is_predicted_with_its_pods() {
        let mut input = cluster(4, 1);
        input.pdbs.push(Pdb {
            max_unavailable: Some(IntOrPercent::Int(0)),
            ..pdb("web", "web", 0, 4)
        });
        let plan = analyse(&input);
        assert_eq!(
            plan.blockers,
            [Blocker::StructuralBudget {
                pdb: "shop/web".into(),
                why: "maxUnavailable is 0: it never allows a disruption".into(),
                pods: vec!["shop/web-0".into()]
            }]
        );
        assert!(
            plan.blockers[0]
                .to_string()
                .contains("shop/web-0 cannot be evicted")
        );
    }

    #[test]
    fn a_pod_under_two_pdbs_is_predicted() {
        let mut input = cluster(4, 1);
        input.pdbs.push(pdb("web", "web", 1, 4));
        input.pdbs.push(pdb("web-too", "web", 1, 4));
        let plan = analyse(&input);
        assert_eq!(
            plan.blockers,
            [Blocker::SeveralBudgets {
                pod: "shop/web-0".into(),
                pdbs: vec!["shop/web".into(), "shop/web-too".into()]
            }]
        );
    }

    #[test]
    fn replacements_with_nowhere_to_go_are_a_cross_node_deadlock() {
        // Every node planned: a PDB allowing 1 with 3 pods on them waits for replacements
        // that no node can take.
        let mut input = cluster(3, 3);
        input.pdbs.push(pdb("web", "web", 1, 3));
        let plan = analyse(&input);
        assert_eq!(plan.blockers.len(), 1, "{:?}", plan.blockers);
        let Blocker::NowhereToGo { pdb: name, why } = &plan.blockers[0] else {
            panic!("{:?}", plan.blockers);
        };
        assert_eq!(name, "shop/web");
        assert!(
            why.contains("no schedulable node is left once these 3 nodes"),
            "{why}"
        );
        // One node left that can take them: no deadlock.
        let mut input = cluster(4, 3);
        input.pdbs.push(pdb("web", "web", 1, 3));
        assert!(analyse(&input).clear());
        // ...unless that node is cordoned or NotReady.
        input.nodes.get_mut("n3").unwrap().unschedulable = true;
        assert!(!analyse(&input).clear());
        // A PDB allowing all of them at once never waits for a replacement.
        let mut input = cluster(3, 3);
        input.pdbs.push(pdb("web", "web", 3, 3));
        assert!(analyse(&input).clear());
    }

    #[test]
    fn one_pod_per_node_needs_as_many_nodes_left_as_replicas() {
        let mut input = cluster(6, 3);
        for pods in input.pods.values_mut() {
            pods[0].one_per_node = true;
        }
        // 5 replicas, one per node, 3 nodes planned: 3 left < 5.
        input.pdbs.push(pdb("web", "web", 1, 5));
        let plan = analyse(&input);
        let Blocker::NowhereToGo { why, .. } = &plan.blockers[0] else {
            panic!("{:?}", plan.blockers);
        };
        assert!(why.contains("its 5 pods need a node each"), "{why}");
        assert!(why.contains("only 3 schedulable nodes are left"), "{why}");
        let mut input = cluster(8, 3);
        for pods in input.pods.values_mut() {
            pods[0].one_per_node = true;
        }
        input.pdbs.push(pdb("web", "web", 1, 5));
        assert!(analyse(&input).clear(), "5 left for 5 replicas");
    }

    #[test]
    fn pods_are_classified_as_the_drain_does() {
        let mut input = cluster(2, 1);
        let mut ds = pod("agent", "agent");
        ds.info.controller = Some(OwnerRef {
            kind: "DaemonSet".into(),
            name: "agent".into(),
            uid: nmo_actors::model::Uid::default(),
        });
        let mut orphan = ds.clone();
        orphan.info.name = "orphan".into();
        orphan.info.controller = Some(OwnerRef {
            kind: "DaemonSet".into(),
            name: "gone".into(),
            uid: nmo_actors::model::Uid::default(),
        });
        let mut mirror = pod("etcd", "etcd");
        mirror.info.is_mirror = true;
        let mut job = pod("job", "job");
        job.info.phase = PodPhase::Succeeded;
        let mut bare = pod("bare", "bare");
        bare.info.controller = None;
        bare.info.has_empty_dir = true;
        input.daemonsets.insert(("shop".into(), "agent".into()));
        input
            .pods
            .get_mut("n0")
            .unwrap()
            .extend([ds, orphan, mirror, job, bare]);
        let plan = analyse(&input);
        let actions: Vec<(&str, Action)> = plan.nodes[0]
            .pods
            .iter()
            .map(|p| (p.name.as_str(), p.action))
            .collect();
        assert_eq!(
            actions,
            [
                ("web-0", Action::Evict),
                ("agent", Action::Skip),
                ("orphan", Action::Evict),
                ("etcd", Action::Skip),
                ("job", Action::Delete),
                ("bare", Action::Evict),
            ]
        );
        let why: Vec<&str> = plan.nodes[0].pods.iter().map(|p| p.why.as_str()).collect();
        assert!(why[2].contains("DaemonSet shop/gone is gone"), "{}", why[2]);
        assert!(why[5].contains("nothing recreates it") && why[5].contains("emptyDir"));
    }

    #[test]
    fn a_missing_node_is_a_blocker() {
        let mut input = cluster(2, 1);
        input.planned.push("ghost".into());
        let plan = analyse(&input);
        assert_eq!(
            plan.blockers,
            [Blocker::NodeMissing {
                node: "ghost".into()
            }]
        );
        assert_eq!(plan.nodes[1].state, "not found");
    }

    #[test]
    fn two_control_plane_nodes_together_break_quorum_without_a_guard() {
        let mut input = cluster(4, 0);
        for name in ["n0", "n1"] {
            input.nodes.get_mut(name).unwrap().control_plane = true;
            input.planned.push(name.into());
        }
        let plan = analyse(&input);
        assert_eq!(plan.blockers.len(), 1, "{:?}", plan.blockers);
        let Blocker::Quorum { node, message } = &plan.blockers[0] else {
            panic!("{:?}", plan.blockers);
        };
        assert_eq!(node, "n1");
        assert!(
            message.contains("control-plane node n0 is already in maintenance"),
            "{message}"
        );
        // One alone is fine, unless another is already in maintenance.
        input.planned.pop();
        assert!(analyse(&input).clear());
        input.maintenances.push(NodeMaintenance::new(
            "nm-n1",
            NodeMaintenanceSpec {
                node_name: "n1".into(),
                reason: None,
                drain_timeout: None,
                on_drain_timeout: None,
            },
        ));
        assert!(!analyse(&input).clear());
    }

    #[test]
    fn the_etcd_guard_decides_on_openshift() {
        let mut input = cluster(4, 0);
        for name in ["n0", "n1"] {
            input.nodes.get_mut(name).unwrap().control_plane = true;
            input.planned.push(name.into());
        }
        input.etcd_pdbs.push(PodDisruptionBudget {
            metadata: ObjectMeta {
                name: Some("etcd-guard-pdb".into()),
                namespace: Some(rules::ETCD_NAMESPACE.into()),
                ..ObjectMeta::default()
            },
            spec: None,
            status: Some(PodDisruptionBudgetStatus {
                disruptions_allowed: 1,
                ..PodDisruptionBudgetStatus::default()
            }),
        });
        let plan = analyse(&input);
        assert_eq!(plan.blockers.len(), 1);
        assert!(
            plan.blockers[0]
                .to_string()
                .contains("allows 1 disruption(s), and 2")
        );
    }
}

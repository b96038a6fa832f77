//! Who starts and who waits: the budget's decision, oldest first.
//!
//! Strictly first in, first out (by creation time, then name): a maintenance never starts
//! before an older one that still waits, so the order an administrator created them in is the
//! order their nodes go. A maintenance for a node that is already unavailable (NotReady, or
//! cordoned by someone else) takes a parallel slot but adds nothing to the unavailable count:
//! that node is counted once.
//!
//! (Over 400 lines only with its unit tests below: the code is 191 lines, one decision
//! kept with the cases that pin it.)

use std::collections::HashSet;
use std::fmt;

use chrono::{DateTime, Utc};

use super::limits::{FleetBudget, Limit};
use super::nodes::NodeView;

/// A NodeMaintenance that waits for the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its node.
    pub node: &'a str,
    /// Its creation time (the queue's order, then the name).
    pub created: DateTime<Utc>,
}

/// Why the queue does not move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitReason {
    /// The nodes have not been listed yet (just started): the budget cannot be counted.
    NodesNotListed,
    /// `--max-parallel-maintenances` is reached.
    Parallel {
        /// Maintenances holding a slot.
        running: usize,
        /// The limit for this cluster.
        limit: usize,
        /// The flag's value.
        setting: Limit,
    },
    /// `--max-unavailable-nodes` is reached.
    Unavailable {
        /// Nodes NotReady or cordoned, those of running maintenances included.
        unavailable: usize,
        /// The limit for this cluster.
        limit: usize,
        /// The flag's value.
        setting: Limit,
    },
}

impl WaitReason {
    /// In a few words, for the status's `queue.waitingFor` and `kubectl get`.
    pub fn short(&self) -> String {
        match self {
            WaitReason::NodesNotListed => "the node list".to_string(),
            WaitReason::Parallel { running, limit, .. } => {
                format!("max-parallel-maintenances: {running} of {limit} running")
            }
            WaitReason::Unavailable {
                unavailable, limit, ..
            } => format!("max-unavailable-nodes: {unavailable} of {limit} unavailable"),
        }
    }
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let setting = |setting: &Limit, limit: usize| match setting {
            Limit::Count(_) => format!("{setting}"),
            Limit::Percent(_) => format!("{setting} = {limit}"),
        };
        match self {
            WaitReason::NodesNotListed => {
                f.write_str("waiting for the list of nodes to count the budget against")
            }
            WaitReason::Parallel {
                running,
                limit,
                setting: s,
            } => write!(
                f,
                "waiting for --max-parallel-maintenances ({}): {running} maintenances hold a slot until they are deleted",
                setting(s, *limit)
            ),
            WaitReason::Unavailable {
                unavailable,
                limit,
                setting: s,
            } => write!(
                f,
                "waiting for --max-unavailable-nodes ({}): {unavailable} nodes are NotReady or cordoned",
                setting(s, *limit)
            ),
        }
    }
}

/// A maintenance that keeps waiting, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// Its name.
    pub name: String,
    /// 1 for the next to start.
    pub position: u32,
    /// What the queue waits for.
    pub reason: WaitReason,
}

/// The budget's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// These start now, oldest first.
    pub admit: Vec<String>,
    /// These keep waiting, in queue order.
    pub waiting: Vec<Waiting>,
}

/// Decides which of `waiting` start, given the maintenances that hold a slot (by their node's
/// name; one per node) and the cluster's nodes.
pub fn decide<'a>(
    budget: &FleetBudget,
    nodes: &NodeView,
    holders: impl IntoIterator<Item = &'a str>,
    waiting: &[Candidate<'_>],
) -> Decision {
    let mut queue: Vec<&Candidate<'_>> = waiting.iter().collect();
    queue.sort_by(|a, b| (a.created, a.name).cmp(&(b.created, b.name)));
    let holders: Vec<&str> = holders.into_iter().collect();
    let mut running = holders.len();
    // Nodes taken out by running maintenances that the node view does not count yet (the
    // cordon is on its way): each counts once, like every other unavailable node.
    let mut taken: HashSet<&str> = holders
        .iter()
        .copied()
        .filter(|node| nodes.contains(node) && !nodes.is_unavailable(node))
        .collect();
    let mut unavailable = nodes.unavailable() + taken.len();
    let parallel = budget.max_parallel.map(|l| (l, l.of(nodes.total())));
    let max_unavailable = budget.max_unavailable.map(|l| (l, l.of(nodes.total())));

    let mut decision = Decision::default();
    let mut blocked: Option<WaitReason> = None;
    if budget.watches_nodes() && !nodes.is_listed() {
        blocked = Some(WaitReason::NodesNotListed);
    }
    for candidate in queue {
        if blocked.is_none() {
            // A missing node is never taken out (that maintenance fails), an unavailable
            // one already counts.
            let adds = nodes.contains(candidate.node)
                && !nodes.is_unavailable(candidate.node)
                && !taken.contains(candidate.node);
            blocked = match (parallel, max_unavailable) {
                (Some((setting, limit)), _) if running >= limit => Some(WaitReason::Parallel {
                    running,
                    limit,
                    setting,
                }),
                (_, Some((setting, limit))) if adds && unavailable >= limit => {
                    Some(WaitReason::Unavailable {
                        unavailable,
                        limit,
                        setting,
                    })
                }
                _ => None,
            };
            if blocked.is_none() {
                running += 1;
                if adds {
                    unavailable += 1;
                    taken.insert(candidate.node);
                }
                decision.admit.push(candidate.name.to_string());
                continue;
            }
        }
        if let Some(reason) = blocked {
            let position = u32::try_from(decision.waiting.len() + 1).unwrap_or(u32::MAX);
            decision.waiting.push(Waiting {
                name: candidate.name.to_string(),
                position,
                reason,
            });
        }
    }
    decision
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::model::{NodeSummary, NodeSummaryEvent};

    fn t(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + secs, 0).single().unwrap()
    }

    fn cluster(nodes: usize, unavailable: &[usize]) -> NodeView {
        let mut view = NodeView::default();
        view.apply(NodeSummaryEvent::Listed(
            (0..nodes)
                .map(|i| NodeSummary {
                    name: format!("n{i}").into(),
                    ready: !unavailable.contains(&i),
                    unschedulable: false,
                })
                .collect(),
        ));
        view
    }

    fn budget(parallel: Option<Limit>, unavailable: Option<Limit>) -> FleetBudget {
        FleetBudget {
            max_parallel: parallel,
            max_unavailable: unavailable,
        }
    }

    struct Owned(Vec<(String, String, DateTime<Utc>)>);

    impl Owned {
        fn candidates(&self) -> Vec<Candidate<'_>> {
            self.0
                .iter()
                .map(|(name, node, created)| Candidate {
                    name,
                    node,
                    created: *created,
                })
                .collect()
        }
    }

    /// `nm-<i>` for node `n<i>`, created at second `i` (so in index order) unless given.
    fn waiting(indexes: &[usize]) -> Owned {
        Owned(
            indexes
                .iter()
                .map(|i| {
                    (
                        format!("nm-{i}"),
                        format!("n{i}"),
                        t(i64::try_from(*i).unwrap()),
                    )
                })
                .collect(),
        )
    }

    #[test]
    fn without_limits_everyone_starts() {
        let w = waiting(&[3, 1, 2]);
        let d = decide(
            &FleetBudget::default(),
            &NodeView::default(),
            [],
            &w.candidates(),
        );
        assert_eq!(d.admit, ["nm-1", "nm-2", "nm-3"]);
        assert!(d.waiting.is_empty());
    }

    #[test]
    fn the_oldest_start_first_and_the_rest_wait_in_order() {
        let w = waiting(&[5, 2, 4, 3, 6]);
        let d = decide(
            &budget(Some(Limit::Count(3)), None),
            &NodeView::default(),
            ["n0"],
            &w.candidates(),
        );
        assert_eq!(d.admit, ["nm-2", "nm-3"]);
        let places: Vec<(&str, u32)> = d
            .waiting
            .iter()
            .map(|w| (w.name.as_str(), w.position))
            .collect();
        assert_eq!(places, [("nm-4", 1), ("nm-5", 2), ("nm-6", 3)]);
        assert_eq!(
            d.waiting[0].reason,
            WaitReason::Parallel {
                running: 3,
                limit: 3,
                setting: Limit::Count(3)
            }
        );
        assert_eq!(
            d.waiting[0].reason.short(),
            "max-parallel-maintenances: 3 of 3 running"
        );
    }

    #[test]
    fn equal_creation_times_are_ordered_by_name() {
        let w = Owned(vec![
            ("b".into(), "n1".into(), t(0)),
            ("a".into(), "n2".into(), t(0)),
        ]);
        let d = decide(
            &budget(Some(Limit::Count(1)), None),
            &NodeView::default(),
            [],
            &w.candidates(),
        );
        assert_eq!(d.admit, ["a"]);
        assert_eq!(d.waiting[0].name, "b");
    }

    #[test]
    fn unavailable_nodes_count_whoever_took_them_out() {
        // 10 nodes, 2 NotReady, 1 held by a running maintenance: 3 of at most 4 unavailable.
        let nodes = cluster(10, &[8, 9]);
        let w = waiting(&[1, 2, 3]);
        let d = decide(
            &budget(None, Some(Limit::Count(4))),
            &nodes,
            ["n0"],
            &w.candidates(),
        );
        assert_eq!(d.admit, ["nm-1"]);
        assert_eq!(
            d.waiting[0].reason,
            WaitReason::Unavailable {
                unavailable: 4,
                limit: 4,
                setting: Limit::Count(4)
            }
        );
    }

    #[test]
    fn a_node_already_unavailable_is_counted_once() {
        // n8 is NotReady: its maintenance adds nothing to the count and may start even though
        // the unavailable limit is reached; it still takes a parallel slot.
        let nodes = cluster(10, &[8, 9]);
        let w = waiting(&[8]);
        let d = decide(
            &budget(Some(Limit::Count(5)), Some(Limit::Count(2))),
            &nodes,
            [],
            &w.candidates(),
        );
        assert_eq!(d.admit, ["nm-8"]);
        // A running maintenance on a NotReady node is not counted twice either.
        let w = waiting(&[1]);
        let d = decide(
            &budget(None, Some(Limit::Count(3))),
            &nodes,
            ["n8"],
            &w.candidates(),
        );
        assert_eq!(d.admit, ["nm-1"], "n8 counted once: 2 + 1 <= 3");
    }

    #[test]
    fn the_queue_is_strictly_first_in_first_out() {
        // nm-1 needs a node the unavailable limit does not allow; nm-8 (a NotReady node)
        // would fit, but it is younger: it waits behind nm-1.
        let nodes = cluster(10, &[8, 9]);
        let w = waiting(&[1, 8]);
        let d = decide(
            &budget(None, Some(Limit::Count(2))),
            &nodes,
            [],
            &w.candidates(),
        );
        assert!(d.admit.is_empty());
        assert_eq!(d.waiting.len(), 2);
        assert_eq!(d.waiting[1].name, "nm-8");
        assert_eq!(d.waiting[1].position, 2);
    }

    #[test]
    fn percentages_are_of_the_nodes_listed() {
        let nodes = cluster(200, &[]);
        let indexes: Vec<usize> = (0..100).collect();
        let w = waiting(&indexes);
        let d = decide(
            &budget(Some(Limit::Percent(10)), None),
            &nodes,
            [],
            &w.candidates(),
        );
        assert_eq!(d.admit.len(), 20);
        assert_eq!(d.waiting.len(), 80);
        assert_eq!(d.waiting[79].position, 80);
        assert_eq!(
            d.waiting[0].reason.to_string(),
            "waiting for --max-parallel-maintenances (10% = 20): 20 maintenances hold a slot until they are deleted"
        );
    }

    #[test]
    fn nothing_starts_before_the_nodes_are_listed() {
        let w = waiting(&[1]);
        let d = decide(
            &budget(None, Some(Limit::Count(5))),
            &NodeView::default(),
            [],
            &w.candidates(),
        );
        assert!(d.admit.is_empty());
        assert_eq!(d.waiting[0].reason, WaitReason::NodesNotListed);
        // A count-only parallel limit needs no node list.
        let d = decide(
            &budget(Some(Limit::Count(1)), None),
            &NodeView::default(),
            [],
            &w.candidates(),
        );
        assert_eq!(d.admit, ["nm-1"]);
    }

    #[test]
    fn a_maintenance_for_a_missing_node_takes_no_node_out() {
        let nodes = cluster(3, &[]);
        let w = Owned(vec![("ghost".into(), "nowhere".into(), t(0))]);
        let d = decide(
            &budget(None, Some(Limit::Count(1))),
            &nodes,
            ["n0"],
            &w.candidates(),
        );
        assert_eq!(d.admit, ["ghost"]);
    }
}

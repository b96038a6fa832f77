//! What the budget knows of the cluster's nodes: per node only whether it is unavailable
//! (NotReady or cordoned), kept up to date from the node summary watch.

use std::collections::HashMap;

use crate::model::{NodeName, NodeSummary, NodeSummaryEvent};

/// The cluster's nodes as the budget counts them.
#[derive(Debug, Clone, Default)]
pub struct NodeView {
    /// Node name -> unavailable (NotReady or cordoned).
    nodes: HashMap<NodeName, bool>,
    /// How many of `nodes` are unavailable.
    unavailable: usize,
    /// The watch has listed every node once.
    listed: bool,
}

impl NodeView {
    /// Applies one event of the node summary watch.
    pub fn apply(&mut self, event: NodeSummaryEvent) {
        match event {
            NodeSummaryEvent::Listed(nodes) => {
                self.nodes.clear();
                self.unavailable = 0;
                for node in nodes {
                    self.set(&node);
                }
                self.nodes.shrink_to_fit();
                self.listed = true;
            }
            NodeSummaryEvent::Changed(node) => self.set(&node),
            NodeSummaryEvent::Deleted(name) => {
                if self.nodes.remove(&name) == Some(true) {
                    self.unavailable -= 1;
                }
            }
        }
    }

    fn set(&mut self, node: &NodeSummary) {
        let now = node.unavailable();
        match self.nodes.get_mut(&node.name) {
            Some(before) => {
                if *before != now {
                    *before = now;
                    if now {
                        self.unavailable += 1;
                    } else {
                        self.unavailable -= 1;
                    }
                }
            }
            None => {
                self.nodes.insert(node.name.clone(), now);
                if now {
                    self.unavailable += 1;
                }
            }
        }
    }

    /// Every node has been listed once: the counts mean something.
    pub fn is_listed(&self) -> bool {
        self.listed
    }

    /// Nodes in the cluster.
    pub fn total(&self) -> usize {
        self.nodes.len()
    }

    /// Nodes NotReady or cordoned.
    pub fn unavailable(&self) -> usize {
        self.unavailable
    }

    /// Whether the node exists.
    pub fn contains(&self, name: &str) -> bool {
        self.nodes.contains_key(name)
    }

    /// Whether the node is NotReady or cordoned.
    pub fn is_unavailable(&self, name: &str) -> bool {
        self.nodes.get(name).copied().unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, ready: bool, unschedulable: bool) -> NodeSummary {
        NodeSummary {
            name: name.into(),
            ready,
            unschedulable,
        }
    }

    #[test]
    fn unavailable_nodes_are_counted_once_whatever_makes_them_so() {
        let mut view = NodeView::default();
        assert!(!view.is_listed());
        view.apply(NodeSummaryEvent::Listed(vec![
            node("a", true, false),
            node("b", false, false),
            node("c", false, true),
        ]));
        assert!(view.is_listed());
        assert_eq!((view.total(), view.unavailable()), (3, 2));
        view.apply(NodeSummaryEvent::Changed(node("a", true, true)));
        assert_eq!(view.unavailable(), 3);
        view.apply(NodeSummaryEvent::Changed(node("a", true, true)));
        assert_eq!(view.unavailable(), 3, "the same change twice counts once");
        view.apply(NodeSummaryEvent::Changed(node("b", true, false)));
        assert_eq!(view.unavailable(), 2);
        assert!(!view.is_unavailable("b") && view.is_unavailable("c"));
        view.apply(NodeSummaryEvent::Deleted("c".into()));
        assert_eq!((view.total(), view.unavailable()), (2, 1));
        view.apply(NodeSummaryEvent::Changed(node("d", false, false)));
        assert_eq!((view.total(), view.unavailable()), (3, 2));
        assert!(view.contains("d") && !view.contains("c"));
    }

    #[test]
    fn a_relist_replaces_everything() {
        let mut view = NodeView::default();
        view.apply(NodeSummaryEvent::Listed(vec![node("a", false, false)]));
        view.apply(NodeSummaryEvent::Listed(vec![
            node("b", true, false),
            node("c", true, false),
        ]));
        assert_eq!((view.total(), view.unavailable()), (2, 0));
        assert!(!view.contains("a"));
    }
}

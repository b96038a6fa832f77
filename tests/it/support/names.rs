//! The names a test writes and the names its objects get in the cluster.
//!
//! On the simulator every test has a cluster of its own, so a name is itself. On the real
//! backend the tests of the binary share one control plane, so the cluster-scoped names of a
//! test (its nodes, NodeMaintenances and namespaces) get a prefix unique to the test: the test
//! writes `node-0`, the cluster has `t7-node-0`. The [`TestEnv`](super::TestEnv) helpers
//! translate on the way in (`env.node("node-0")` reads `t7-node-0`), so a test body reads the
//! same on both backends; what a test compares with names found in objects goes through
//! [`Names::name`] / [`Names::namespace`] (`env.name("node-0")`, `env.ns("workloads")`).
//! A prefix keeps a name's text, so `contains("nm-0")` holds for `t7-nm-0` too.

/// Namespaces shared by every test, never prefixed: the API server's own, the node leases' of
/// the medik8s operators, and nmo's (its ServiceAccount and leader-election Role live there).
const SHARED_NAMESPACES: [&str; 5] = [
    "default",
    "kube-public",
    "kube-node-lease",
    "medik8s-leases",
    "nmo-system",
];

/// How a test's names map to the cluster's.
#[derive(Clone, Debug, Default)]
pub struct Names {
    /// `t<n>-` on the real backend; none on the simulator.
    prefix: Option<String>,
}

impl Names {
    /// Names as written (a cluster of the test's own).
    pub fn identity() -> Names {
        Names { prefix: None }
    }

    /// Names prefixed with `prefix` (which ends with `-`).
    pub fn prefixed(prefix: &str) -> Names {
        Names {
            prefix: Some(prefix.to_string()),
        }
    }

    /// A cluster-scoped name (a node, a NodeMaintenance) in the cluster.
    pub fn name(&self, name: &str) -> String {
        match &self.prefix {
            Some(prefix) if !name.is_empty() => format!("{prefix}{name}"),
            _ => name.to_string(),
        }
    }

    /// A namespace in the cluster (the shared ones stay as they are).
    pub fn namespace(&self, namespace: &str) -> String {
        if SHARED_NAMESPACES.contains(&namespace) {
            namespace.to_string()
        } else {
            self.name(namespace)
        }
    }

    /// A namespace that may be absent (None: every namespace, or a cluster-scoped kind).
    pub fn namespace_opt(&self, namespace: Option<&str>) -> Option<String> {
        namespace.map(|namespace| self.namespace(namespace))
    }

    /// Whether objects of `kind` have cluster-scoped names this test owns (translated).
    pub fn owns_kind(kind: &str) -> bool {
        matches!(kind, "Node" | "NodeMaintenance" | "Namespace")
    }

    /// An object as the cluster must have it: its namespace, its name when its kind's names
    /// are the test's own, and the node a Pod is bound to or a NodeMaintenance targets.
    pub fn object(&self, mut object: serde_json::Value) -> serde_json::Value {
        if self.prefix.is_none() {
            return object;
        }
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        if let Some(namespace) = object["metadata"]["namespace"].as_str() {
            object["metadata"]["namespace"] = self.namespace(namespace).into();
        }
        if let Some(name) = object["metadata"]["name"].as_str() {
            let name = match kind.as_str() {
                "Namespace" => self.namespace(name),
                kind if Names::owns_kind(kind) => self.name(name),
                _ => name.to_string(),
            };
            object["metadata"]["name"] = name.into();
        }
        if matches!(kind.as_str(), "Pod" | "NodeMaintenance")
            && let Some(node) = object["spec"]["nodeName"].as_str()
        {
            object["spec"]["nodeName"] = self.name(node).into();
        }
        object
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_simulator_keeps_every_name() {
        let names = Names::identity();
        assert_eq!(names.name("node-0"), "node-0");
        assert_eq!(names.namespace("workloads"), "workloads");
        let object = json!({"kind": "Pod", "metadata": {"name": "p", "namespace": "w"},
                            "spec": {"nodeName": "node-0"}});
        assert_eq!(names.object(object.clone()), object);
    }

    #[test]
    fn the_real_backend_prefixes_what_the_test_owns_and_keeps_what_is_shared() {
        let names = Names::prefixed("t7-");
        assert_eq!(names.name("node-0"), "t7-node-0");
        assert_eq!(names.namespace("workloads"), "t7-workloads");
        assert_eq!(names.namespace("kube-system"), "t7-kube-system");
        for shared in SHARED_NAMESPACES {
            assert_eq!(names.namespace(shared), shared);
        }
        assert_eq!(
            names.object(
                json!({"kind": "NodeMaintenance", "metadata": {"name": "nm-0"},
                                "spec": {"nodeName": "node-0"}})
            ),
            json!({"kind": "NodeMaintenance", "metadata": {"name": "t7-nm-0"},
                   "spec": {"nodeName": "t7-node-0"}})
        );
        assert_eq!(
            names.object(
                json!({"kind": "Pod", "metadata": {"name": "p", "namespace": "w"},
                                "spec": {"nodeName": "node-0"}})
            ),
            json!({"kind": "Pod", "metadata": {"name": "p", "namespace": "t7-w"},
                   "spec": {"nodeName": "t7-node-0"}})
        );
        assert_eq!(
            names.object(
                json!({"kind": "Lease", "metadata": {"name": "l", "namespace": "default"}})
            ),
            json!({"kind": "Lease", "metadata": {"name": "l", "namespace": "default"}})
        );
    }
}

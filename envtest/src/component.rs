//! The processes of a control plane.

use std::fmt;

/// One process of the control plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Component {
    /// etcd, the store.
    Etcd,
    /// kube-apiserver.
    ApiServer,
    /// kube-controller-manager: ReplicaSet, DaemonSet, garbage-collector, disruption (PDB
    /// status), namespace, node lifecycle and service-account controllers.
    ControllerManager,
    /// kube-scheduler: binds pods to nodes.
    Scheduler,
}

impl Component {
    /// Every component, in start order.
    pub const ALL: [Component; 4] = [
        Component::Etcd,
        Component::ApiServer,
        Component::ControllerManager,
        Component::Scheduler,
    ];

    /// The binary's file name in `KUBEBUILDER_ASSETS`.
    pub fn binary(self) -> &'static str {
        match self {
            Component::Etcd => "etcd",
            Component::ApiServer => "kube-apiserver",
            Component::ControllerManager => "kube-controller-manager",
            Component::Scheduler => "kube-scheduler",
        }
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.binary())
    }
}

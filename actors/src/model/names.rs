//! The names nmo shares with the Go operator and the other medik8s operators: the
//! finalizer, the lease holder, the label, the taints and the annotations.

/// The NodeMaintenance finalizer (wire compatible with NMO).
pub const FINALIZER: &str = "foregroundDeleteNodeMaintenance";
/// Holder identity nmo writes into the node lease.
pub const LEASE_HOLDER: &str = "node-maintenance";
/// Node label that tells other medik8s operators to keep their hands off.
pub const EXCLUDE_LABEL: &str = "remediation.medik8s.io/exclude-from-remediation";
/// Value of [`EXCLUDE_LABEL`].
pub const EXCLUDE_LABEL_VALUE: &str = "true";
/// Taint key nmo adds to a node in maintenance.
pub const DRAIN_TAINT_KEY: &str = "medik8s.io/drain";
/// Taint key of the unschedulable taint nmo adds alongside the cordon.
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";
/// Effect of both nmo taints.
pub const NO_SCHEDULE: &str = "NoSchedule";
/// Node annotation with nmo's record of what a node had before nmo first changed it (see
/// [`super::NodeRecord`]).
pub const RECORD_ANNOTATION: &str = "nodemaintenance.medik8s.io/before-maintenance";
/// Annotation marking a mirror (static) pod.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

//! Domain types shared by the actors and the [`crate::ports::Cluster`] port. They mirror the
//! Kubernetes objects nmo touches, reduced to the fields nmo reads or writes: one file per
//! object (`maintenance`, `node` with its lease, `pod`, `event`), the wire `names` they share
//! with the Go operator, and the `ids` (names and uids) they are known by.

mod event;
mod ids;
mod maintenance;
mod names;
mod node;
mod pod;
mod text;
mod vm;

pub use event::{Event, EventTarget, EventType};
pub use ids::{MaintenanceName, NodeName, Uid};
pub use maintenance::{
    Condition, ConditionStatus, DrainPolicy, FailureKind, Maintenance, MaintenanceStatus,
    OnDrainTimeout, PendingPodReason, Phase, PodRef, QueuePlace, SpecField, SpecProblem,
    StatusPrecondition, conditions, reasons,
};
pub use names::{
    DRAIN_TAINT_KEY, EXCLUDE_LABEL, EXCLUDE_LABEL_VALUE, FINALIZER, LEASE_HOLDER,
    MIRROR_ANNOTATION, NO_SCHEDULE, RECORD_ANNOTATION, UNSCHEDULABLE_TAINT_KEY,
};
pub use node::{
    Lease, NodeOwner, NodePatch, NodeReady, NodeRecord, NodeState, NodeSummary, NodeSummaryEvent,
    RecordWrite, Taint,
};
pub use pod::{Labels, OwnerRef, PodInfo, PodList, PodPhase};
pub use text::bounded;
pub use vm::{VmCondition, VmInfo, VmList, VmMigration};

//! The eviction actor's messages, and what it reports back to an asker.

use ractor::{DerivedActorRef, RpcReplyPort};

use crate::diagnosis::{Blocker, Investigation};
use crate::model::{MaintenanceName, OwnerRef, PodRef, Uid};
use crate::pdb::PdbChange;
use crate::ports::{ClusterError, EvictionOutcome};

/// Messages to the eviction actor.
#[derive(Debug)]
pub enum EvictionMsg {
    /// Evict a pod; the outcome goes to `reply_to`.
    Evict(EvictionRequest),
    /// The pod of a request left the node (or its name now belongs to another pod): forget
    /// the request for the pod with this uid, sent or not (the outcome of a call already out
    /// is dropped; its uid precondition keeps it off any other pod).
    Withdraw {
        /// The pod's namespace and name.
        pod: PodRef,
        /// The uid of the pod that left.
        uid: Uid,
    },
    /// Forget every request of this NodeMaintenance that has not been sent yet.
    Cancel {
        /// NodeMaintenance name.
        maintenance: MaintenanceName,
    },
    /// Internal: one of the actor's timers fired (see `crate::timers`).
    Wake(Wake),
    /// Internal: a watch ended; it is subscribed again after a while.
    WatchEnded(WatchKind),
    /// Internal: an eviction call returned.
    Done {
        /// The pod.
        pod: PodRef,
        /// The uid the call named (its precondition).
        uid: Uid,
        /// What the API said.
        result: Result<EvictionOutcome, ClusterError>,
    },
    /// Counters (introspection, tests).
    Stats(RpcReplyPort<EvictionStats>),
    /// Internal: the PDB watch reported a change.
    Pdbs(PdbChange),
    /// Internal: a look at a blocked PDB ended.
    Diagnosed {
        /// The PDB's key.
        key: String,
        /// What was found.
        investigation: Investigation,
    },
    /// Internal: the watch of admission webhooks on `pods/eviction` reported the current set.
    Webhooks(crate::interception::EvictionWebhooks),
}

/// Which watch of the eviction actor ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchKind {
    /// The shared PodDisruptionBudget watch.
    Pdbs,
    /// The watch of admission webhooks on `pods/eviction`.
    Webhooks,
}

/// What the eviction actor's timers wake it for. Each value has at most one timer pending
/// (see `crate::timers::Timers`): each PDB's gate and diagnosis have timers of their own.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Wake {
    /// Send what the rate limit and the in-flight cap allow.
    Pump,
    /// This PodDisruptionBudget's (key) backoff elapsed.
    GateOpen(String),
    /// Time to look at why this PDB (key) blocks.
    Diagnose(String),
    /// Accepted evictions the PDBs' status never showed stop counting.
    Expire,
    /// Intercepted pods are due to be asked again.
    Reask,
    /// Subscribe again to a watch that ended.
    Resubscribe(WatchKind),
}

impl crate::timers::WakeMsg for EvictionMsg {
    type Wake = Wake;

    fn wake(wake: Wake) -> Self {
        EvictionMsg::Wake(wake)
    }

    #[cfg(test)]
    fn into_wake(self) -> Option<Wake> {
        match self {
            EvictionMsg::Wake(wake) => Some(wake),
            _ => None,
        }
    }
}

/// One eviction asked of the eviction actor.
#[derive(Debug, Clone)]
pub struct EvictionRequest {
    /// The pod.
    pub pod: PodRef,
    /// The pod's uid: the eviction's precondition, so that it never reaches another pod that
    /// took the name (the drain decided on this one).
    pub uid: Uid,
    /// The pod's grace period (None = its own).
    pub grace_period_seconds: Option<i64>,
    /// NodeMaintenance name of the asker (for cancellation).
    pub maintenance: MaintenanceName,
    /// Who gets the outcome.
    pub reply_to: DerivedActorRef<EvictionReport>,
    /// The asking drain's span: each eviction call's span is its child, so a maintenance reads
    /// as one trace (set explicitly: ractor's message span propagation would use whatever span
    /// the sender happened to be in).
    pub span: tracing::Span,
    /// The pod's labels: which PDBs select it.
    pub labels: crate::model::Labels,
    /// Running and Ready: its PDB counts it as healthy.
    pub healthy: bool,
    /// Pending: the Eviction API deletes it without asking its PDB.
    pub unstarted: bool,
    /// The pod's controller (the diagnosis looks for its replacement).
    pub controller: Option<OwnerRef>,
}

/// An outcome reported to the asking node actor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionReport {
    /// The pod.
    pub pod: PodRef,
    /// The uid its request named.
    pub uid: Uid,
    /// What happened.
    pub reply: EvictionReply,
}

/// What happened to an eviction request. Every variant but `Blocked` is final: the request is
/// no longer held and the asker re-asks on its retry tick if the pod is still there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvictionReply {
    /// Evicted, or already gone.
    Done,
    /// Its PDB allows no disruption now (by its watched status, or a 429); still held, sent
    /// when the PDB allows. Sent again when the diagnosis changes.
    Blocked {
        /// The PDB, when known.
        pdb: Option<String>,
        /// The API's explanation (with the PDB's numbers).
        message: String,
        /// Why, as diagnosed (as the asking maintenance sees it), when known.
        blocker: Option<Blocker>,
    },
    /// More than one PodDisruptionBudget matches the pod: eviction impossible until fixed.
    TooManyPdbs {
        /// The API's message.
        message: String,
    },
    /// The pod's namespace is terminating.
    NamespaceTerminating,
    /// The eviction queue is full: ask again later.
    Refused,
    /// The API call failed.
    Failed(String),
}

impl EvictionReply {
    /// True when the eviction actor no longer holds the request (every reply but `Blocked`):
    /// the asker asks again if the pod is still there.
    pub fn is_final(&self) -> bool {
        !matches!(self, EvictionReply::Blocked { .. })
    }
}

/// Counters of the eviction actor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EvictionStats {
    /// Eviction calls made.
    pub calls: u64,
    /// Calls refused by a PodDisruptionBudget.
    pub blocked: u64,
    /// Calls refused by throttling.
    pub throttled: u64,
    /// Requests refused because the queue was full.
    pub refused: u64,
    /// Requests currently held.
    pub held: usize,
    /// PodDisruptionBudgets remembered (their backoff), i.e. with a held pod behind them.
    pub gates: usize,
    /// Pods remembered as refused by a PDB.
    pub gated_pods: usize,
    /// Requests that waited on a PDB's status instead of being sent.
    pub pdb_waits: u64,
    /// API reads made to explain blocked PDBs.
    pub diagnosis_reads: u64,
    /// Refusals of requests that something intercepts (by its webhook, or its budget after
    /// the webhook let the request through): each is asked again with backoff.
    pub intercepted: u64,
    /// Intercepted requests waiting for their re-ask now.
    pub reasks: usize,
    /// The eviction calls that may be out at once now: the configured cap, less after the API
    /// server throttled.
    pub in_flight_limit: usize,
}

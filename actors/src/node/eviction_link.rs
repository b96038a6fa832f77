//! The node actor's line to the eviction actor: what it asks for one maintenance's pods, and
//! where the answers come back. Set once when the actor starts; nothing changes it.

use ractor::{ActorRef, DerivedActorRef};

use super::pending::PendingPod;
use crate::eviction::{EvictionMsg, EvictionReport, EvictionRequest};
use crate::model::{MaintenanceName, PodRef, Uid};

/// The eviction actor, as one maintenance's node actor speaks to it.
pub(super) struct EvictionLink {
    evictor: ActorRef<EvictionMsg>,
    /// Where the eviction actor sends its reports: the node actor, seen only as a receiver of
    /// [`EvictionReport`]s.
    reports: DerivedActorRef<EvictionReport>,
    /// The NodeMaintenance the requests are for.
    maintenance: MaintenanceName,
}

impl EvictionLink {
    /// Requests for `maintenance` go to `evictor`, whose answers go to `reports`.
    pub(super) fn new(
        evictor: ActorRef<EvictionMsg>,
        reports: DerivedActorRef<EvictionReport>,
        maintenance: MaintenanceName,
    ) -> Self {
        EvictionLink {
            evictor,
            reports,
            maintenance,
        }
    }

    /// Asks for `pending`'s eviction, attempts traced under `span`; true when the request
    /// reached the eviction actor.
    pub(super) fn evict(&self, pending: &PendingPod, span: &tracing::Span) -> bool {
        let request = EvictionRequest {
            pod: pending.pod.clone(),
            uid: pending.uid.clone(),
            grace_period_seconds: pending.grace,
            maintenance: self.maintenance.clone(),
            reply_to: self.reports.clone(),
            span: span.clone(),
            labels: pending.labels.clone(),
            healthy: pending.healthy,
            unstarted: pending.unstarted,
            controller: pending.controller.clone(),
        };
        self.evictor.cast(EvictionMsg::Evict(request)).is_ok()
    }

    /// Withdraws the request for pod `pod` with uid `uid` (it left the node, or its name now
    /// belongs to another pod). Best effort: an eviction actor that is gone evicts nothing.
    pub(super) fn withdraw(&self, pod: PodRef, uid: Uid) {
        let _ = self.evictor.cast(EvictionMsg::Withdraw { pod, uid });
    }

    /// The eviction actor forgets every request of this maintenance that has not gone out yet
    /// (best effort, as [`Self::withdraw`]).
    pub(super) fn cancel_all(&self) {
        let _ = self.evictor.cast(EvictionMsg::Cancel {
            maintenance: self.maintenance.clone(),
        });
    }
}

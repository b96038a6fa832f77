//! What every operation of a node actor shares: its context and the small steps several of
//! them take (events, a race-proof node patch).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::config::Config;
use crate::model::{
    Event, EventTarget, EventType, MaintenanceName, NodeName, NodePatch, NodeState, Uid,
};
use crate::ports::{Cluster, ClusterError};

/// How often an operation retries a write that lost an optimistic-concurrency race before
/// giving up until the next tick.
pub(super) const CONFLICT_RETRIES: usize = 5;

/// What a node actor's operations need.
#[derive(Clone)]
pub(crate) struct OpCtx {
    pub cluster: Arc<dyn Cluster>,
    pub config: Arc<Config>,
    pub nm_name: MaintenanceName,
    pub nm_uid: Uid,
    pub node_name: NodeName,
    /// Set as soon as the actor learns of the deletion: an operation in progress then stops
    /// before cordoning anything.
    pub deleting: Arc<AtomicBool>,
}

impl OpCtx {
    /// The actor learned of the deletion: every operation sharing this context stops before it
    /// cordons anything.
    pub(crate) fn deletion_seen(&self) {
        self.deleting.store(true, Ordering::SeqCst);
    }
}

/// Emits an event; a failure is only logged (events are best effort).
pub(crate) async fn emit(cluster: &Arc<dyn Cluster>, event: Event) {
    if let Err(err) = cluster.emit_event(&event).await {
        tracing::warn!(reason = %event.reason, error = %err, "cannot emit event");
    }
}

/// An event on the NodeMaintenance.
pub(crate) fn nm_event(ctx: &OpCtx, type_: EventType, reason: &str, message: String) -> Event {
    Event {
        target: EventTarget::Maintenance {
            name: ctx.nm_name.clone(),
            uid: ctx.nm_uid.clone(),
        },
        type_,
        reason: reason.to_string(),
        message,
    }
}

/// Applies a node patch built from fresh reads until no race defeats it; returns the node and
/// whether it was patched at all.
pub(super) async fn patch_until_settled<F>(
    ctx: &OpCtx,
    mut node: NodeState,
    build: F,
) -> Result<(NodeState, bool), ClusterError>
where
    F: Fn(&NodeState) -> Option<NodePatch>,
{
    for _ in 0..CONFLICT_RETRIES {
        let Some(patch) = build(&node) else {
            return Ok((node, false));
        };
        match ctx.cluster.patch_node(&patch).await {
            Ok(written) => return Ok((written, true)),
            Err(ClusterError::Conflict(error)) => {
                tracing::info!(%error, "node changed under the patch, retrying from a fresh read");
                node = ctx
                    .cluster
                    .get_node(&ctx.node_name)
                    .await?
                    .ok_or_else(|| ClusterError::NotFound(ctx.node_name.to_string()))?;
            }
            Err(err) => return Err(err),
        }
    }
    Err(ClusterError::Conflict(format!(
        "node {} kept changing under the patch",
        ctx.node_name
    )))
}

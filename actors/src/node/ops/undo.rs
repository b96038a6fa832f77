//! Taking the node out of maintenance: exactly what nmo changed, as its record on the node
//! says (see [`crate::model::NodeRecord`]), and nmo's lease.

use tracing::Instrument;

use super::ctx::{OpCtx, emit, nm_event, patch_until_settled};
use super::lease_calls::release_lease;
use crate::decisions::{self, Undoer};
use crate::model::{Event, EventTarget, EventType, Lease, NodeState, reasons};
use crate::node::errors::{ReleaseError, UndoError};

/// What an undo starts from, as the actor last saw it.
#[derive(Debug, Clone)]
pub(crate) struct UndoInput {
    /// Deleted (not only failed): remove the finalizer too.
    pub finalizer: bool,
    /// What the actor knows of the node and its lease.
    pub known: Known,
    /// The NodeMaintenance's finalizers as last seen (removed from without a read while
    /// current).
    pub finalizers: Vec<String>,
}

/// What a node actor knows of the node and its lease, so the undo need not read them again.
#[derive(Debug, Clone, Default)]
pub(crate) struct Known {
    /// The Node as its watch last delivered it, if it ever did.
    pub node: Option<Option<NodeState>>,
    /// nmo's lease as nmo last wrote it, while it is surely still valid (then no one else can
    /// hold it).
    pub lease: Option<Lease>,
}

/// Takes back what this maintenance changed on the node and releases nmo's lease; with
/// `finalizer`, also removes the finalizer and says so (deletion). Never adds anything.
pub(crate) async fn undo(ctx: OpCtx, input: UndoInput) -> Result<(), UndoError> {
    let finalizer = input.finalizer;
    restore(&ctx, Undoer::Maintenance(&ctx.nm_uid), input.known).await?;
    if finalizer {
        ctx.cluster
            .remove_finalizer(&ctx.nm_name, &ctx.nm_uid, &input.finalizers)
            .instrument(tracing::info_span!("remove_finalizer"))
            .await
            .map_err(UndoError::RemoveFinalizer)?;
        emit(
            &ctx.cluster,
            nm_event(
                &ctx,
                EventType::Normal,
                reasons::REMOVED,
                format!("Removed the node maintenance for node {}", ctx.node_name),
            ),
        )
        .await;
    }
    tracing::info!(finalizer_removed = finalizer, "node out of maintenance");
    Ok(())
}

/// Takes `undoer`'s changes off the node (following the node's record) and deletes nmo's
/// lease. The lease is read first: while another operator validly holds it (a remediation in
/// progress), only what is nmo's alone is taken back and the cordon stays with the holder.
///
/// What the actor knows (`known`) spares reads:
/// - nmo's lease as nmo last wrote it, while surely still valid: no other holder can have
///   taken a valid lease, so it is not read; its deletion is conditional on that
///   resourceVersion (a lease changed meanwhile is a conflict, then read and decided afresh).
/// - the node as watched, when it still carries the undoer's changes: the patch tests its
///   taints, so a stale copy costs a conflict and a fresh read, never a lost change. A copy
///   showing nothing to undo is read again: a watch a moment behind nmo's own cordon must not
///   make the undo skip it.
pub(crate) async fn restore(
    ctx: &OpCtx,
    undoer: Undoer<'_>,
    known: Known,
) -> Result<(), UndoError> {
    let lease = match known.lease {
        Some(lease) => Some(lease),
        None => ctx
            .cluster
            .get_lease(
                &ctx.config.lease_namespace,
                &decisions::lease_name(&ctx.node_name),
            )
            .await
            .map_err(|e| UndoError::Release(ReleaseError::Read(e)))?,
    };
    let now = ctx.config.now();
    let foreign_holder = lease
        .as_ref()
        .is_some_and(|l| !decisions::lease_is_ours(l) && decisions::lease_valid(l, now));
    let watched = known
        .node
        .flatten()
        .filter(|n| decisions::undo_patch(n, undoer, foreign_holder).is_some());
    let node = match watched {
        Some(node) => Some(node),
        None => ctx
            .cluster
            .get_node(&ctx.node_name)
            .await
            .map_err(UndoError::ReadNode)?,
    };
    if let Some(node) = node {
        let uid = node.uid.clone();
        let was_cordoned = node.unschedulable;
        let (written, patched) = patch_until_settled(ctx, node, |n| {
            decisions::undo_patch(n, undoer, foreign_holder)
        })
        .instrument(tracing::info_span!("uncordon"))
        .await
        .map_err(UndoError::Uncordon)?;
        if patched && was_cordoned && !written.unschedulable {
            emit(
                &ctx.cluster,
                Event {
                    target: EventTarget::Node {
                        name: ctx.node_name.clone(),
                        uid,
                    },
                    type_: EventType::Normal,
                    reason: reasons::UNCORDON.to_string(),
                    message: format!("Uncordon node {}", ctx.node_name),
                },
            )
            .await;
        }
    }
    release_lease(ctx, lease).await?;
    Ok(())
}

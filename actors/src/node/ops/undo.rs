//! Taking the node out of maintenance: exactly what nmo changed, as its record on the node
//! says (see [`crate::model::NodeRecord`]), and nmo's lease.

use tracing::Instrument;

use super::ctx::{OpCtx, emit, nm_event, patch_until_settled};
use super::lease::release_lease;
use crate::model::{Event, EventTarget, EventType, reasons};
use crate::node::errors::{ReleaseError, UndoError};
use crate::plan::{self, Undoer};

/// Takes back what this maintenance changed on the node and releases nmo's lease; with
/// `finalizer`, also removes the finalizer and says so (deletion). Never adds anything.
pub(crate) async fn undo(ctx: OpCtx, finalizer: bool) -> Result<(), UndoError> {
    restore(&ctx, Undoer::Maintenance(&ctx.nm_uid)).await?;
    if finalizer {
        ctx.cluster
            .remove_finalizer(&ctx.nm_name, &ctx.nm_uid)
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
pub(crate) async fn restore(ctx: &OpCtx, undoer: Undoer<'_>) -> Result<(), UndoError> {
    let lease = ctx
        .cluster
        .get_lease(
            &ctx.config.lease_namespace,
            &plan::lease_name(&ctx.node_name),
        )
        .await
        .map_err(|e| UndoError::Release(ReleaseError::Read(e)))?;
    let now = ctx.config.now();
    let foreign_holder = lease
        .as_ref()
        .is_some_and(|l| !plan::lease_is_ours(l) && plan::lease_valid(l, now));
    let node = ctx
        .cluster
        .get_node(&ctx.node_name)
        .await
        .map_err(UndoError::ReadNode)?;
    if let Some(node) = node {
        let uid = node.uid.clone();
        let was_cordoned = node.unschedulable;
        let (written, patched) =
            patch_until_settled(ctx, node, |n| plan::undo_patch(n, undoer, foreign_holder))
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

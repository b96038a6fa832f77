//! Taking the node out of maintenance.

use tracing::Instrument;

use super::ctx::{OpCtx, emit, nm_event, patch_until_settled};
use super::lease::release_lease;
use crate::model::{Event, EventTarget, EventType, reasons};
use crate::node::errors::UndoError;
use crate::plan;

/// Takes the node out of maintenance and releases our lease; with `finalizer`, also removes
/// the finalizer and says so (deletion). Never adds anything.
pub(crate) async fn undo(ctx: OpCtx, finalizer: bool) -> Result<(), UndoError> {
    let node = ctx
        .cluster
        .get_node(&ctx.node_name)
        .await
        .map_err(UndoError::ReadNode)?;
    if let Some(node) = node {
        let uid = node.uid.clone();
        let (_, patched) = patch_until_settled(&ctx, node, plan::undo_patch)
            .instrument(tracing::info_span!("uncordon"))
            .await
            .map_err(UndoError::Uncordon)?;
        if patched {
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
    release_lease(&ctx).await?;
    if finalizer {
        ctx.cluster
            .remove_finalizer(&ctx.nm_name)
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

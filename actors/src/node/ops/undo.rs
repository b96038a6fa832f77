//! Taking the node out of maintenance: exactly what nmo changed, as its record on the node
//! says (see [`crate::model::NodeRecord`]), and nmo's lease.

use tracing::Instrument;

use super::ctx::{OpCtx, emit, nm_event, patch_until_settled};
use super::lease_calls::release_lease;
use std::sync::atomic::Ordering;

use crate::decisions::{self, Restore, Undoer};
use crate::model::{Event, EventTarget, EventType, Lease, NodeRecord, NodeState, Uid, reasons};
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
    /// The maintenance's own copy of its record of the node (from its status): what the undo
    /// follows, whatever the node's record says now.
    pub record: Option<NodeRecord>,
    /// The maintenance never touched its node nor the lease (it failed for an invalid spec
    /// before it did anything): neither is read, nor changed.
    pub untouched: bool,
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
    let undoer = Undoer::Maintenance {
        uid: &ctx.nm_uid,
        copy: input.record.as_ref(),
    };
    if !input.untouched {
        restore(&ctx, undoer, input.known).await?;
    }
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
async fn restore(ctx: &OpCtx, undoer: Undoer<'_>, known: Known) -> Result<(), UndoError> {
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
        // Whether the patch that went through knew what the node had before.
        let unknown = std::sync::atomic::AtomicBool::new(false);
        let build = |n: &NodeState| {
            let restore = decisions::restore(n, undoer);
            unknown.store(restore == Some(Restore::Unknown), Ordering::Relaxed);
            decisions::undo_patch(n, undoer, foreign_holder)
        };
        let (written, patched) = patch_until_settled(ctx, node, build)
            .instrument(tracing::info_span!("uncordon"))
            .await
            .map_err(UndoError::Uncordon)?;
        if patched {
            let restore = unknown.load(Ordering::Relaxed).then_some(Restore::Unknown);
            announce(ctx, &uid, restore, was_cordoned, &written).await;
        }
    }
    release_lease(ctx, lease).await?;
    Ok(())
}

/// Says what an undo patch did to the node `uid`, in events on it: `UncordonNode` when it
/// uncordoned a node that was cordoned, and a Warning when it undid it without knowing what
/// it had before (`restore` is [`Restore::Unknown`]).
pub(crate) async fn announce(
    ctx: &OpCtx,
    uid: &Uid,
    restore: Option<Restore>,
    was_cordoned: bool,
    written: &NodeState,
) {
    let event = |type_, reason: &str, message: String| Event {
        target: EventTarget::Node {
            name: ctx.node_name.clone(),
            uid: uid.clone(),
        },
        type_,
        reason: reason.to_string(),
        message,
    };
    if restore == Some(Restore::Unknown) {
        let message = format!(
            "What node {} had before its maintenance is not known (it was already in \
             maintenance, with no record of it, when nmo took it over): every mark of a \
             maintenance was taken off, as the Go operator's undo does",
            ctx.node_name
        );
        emit(
            &ctx.cluster,
            event(EventType::Warning, reasons::PRIOR_STATE_UNKNOWN, message),
        )
        .await;
    }
    if was_cordoned && !written.unschedulable {
        let message = format!("Uncordon node {}", ctx.node_name);
        emit(
            &ctx.cluster,
            event(EventType::Normal, reasons::UNCORDON, message),
        )
        .await;
    }
}

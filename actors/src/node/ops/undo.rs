//! Taking the node out of maintenance.

use tracing::Instrument;

use super::ctx::{OpCtx, emit, nm_event, patch_until_settled};
use super::lease::release_lease;
use crate::model::{Event, EventTarget, EventType, NodeState, reasons};
use crate::node::errors::UndoError;
use crate::plan;

/// What an undo starts from, as the actor last saw it.
#[derive(Debug, Clone)]
pub(crate) struct UndoInput {
    /// Deleted (not only failed): remove the finalizer too.
    pub finalizer: bool,
    /// The Node as its watch last delivered it, if it ever did.
    pub node: Option<Option<NodeState>>,
}

/// Takes the node out of maintenance and releases our lease; with `finalizer`, also removes
/// the finalizer and says so (deletion). Never adds anything.
pub(crate) async fn undo(ctx: OpCtx, input: UndoInput) -> Result<(), UndoError> {
    let finalizer = input.finalizer;
    // The node as watched, when it still carries nmo's changes: the patch tests its taints,
    // so a stale copy costs a conflict and a fresh read, never a lost change. Otherwise it is
    // read: a watch a moment behind nmo's own cordon must not make the undo skip it.
    let node = match input
        .node
        .flatten()
        .filter(|n| plan::undo_patch(n).is_some())
    {
        Some(node) => Some(node),
        None => ctx
            .cluster
            .get_node(&ctx.node_name)
            .await
            .map_err(UndoError::ReadNode)?,
    };
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::config::Config;
    use crate::fake::FakeCluster;

    fn ctx(cluster: &FakeCluster) -> OpCtx {
        OpCtx {
            cluster: Arc::new(cluster.clone()),
            config: Arc::new(Config::default()),
            nm_name: "nm1".into(),
            nm_uid: "uid-nm1".into(),
            node_name: "n1".into(),
            deleting: Arc::new(AtomicBool::new(true)),
        }
    }

    fn in_maintenance(cluster: &FakeCluster) -> NodeState {
        let node = cluster.node("n1").unwrap();
        let patch = plan::maintenance_patch(&node, chrono::Utc::now()).unwrap();
        let mut node = node;
        node.taints = patch.desired_taints;
        node.unschedulable = true;
        for (key, value) in patch.labels {
            if let Some(value) = value {
                node.labels.insert(key, value);
            }
        }
        cluster.set_node(node.clone());
        node
    }

    #[tokio::test]
    async fn the_node_as_watched_is_patched_without_a_read() {
        let cluster = FakeCluster::with_node("n1", 0);
        let watched = in_maintenance(&cluster);
        let input = UndoInput {
            finalizer: false,
            node: Some(Some(watched)),
        };
        undo(ctx(&cluster), input).await.unwrap();
        assert!(plan::undo_patch(&cluster.node("n1").unwrap()).is_none());
        assert_eq!(cluster.count_calls("get_node"), 0);
    }

    #[tokio::test]
    async fn a_watched_node_with_nothing_to_undo_is_read_before_trusting_it() {
        let cluster = FakeCluster::with_node("n1", 0);
        let before = cluster.node("n1").unwrap();
        in_maintenance(&cluster);
        // The watch had not yet delivered nmo's own cordon.
        let input = UndoInput {
            finalizer: false,
            node: Some(Some(before)),
        };
        undo(ctx(&cluster), input).await.unwrap();
        assert!(
            plan::undo_patch(&cluster.node("n1").unwrap()).is_none(),
            "left in maintenance: {:?}",
            cluster.node("n1")
        );
        assert_eq!(cluster.count_calls("get_node"), 1);
    }
}

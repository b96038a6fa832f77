//! Start-up and repair: finalizer, first-time counts, node, lease, label + taints + cordon.
//! The counts and the node come from the actor's watches (see `crate::node::watches` and `crate::node::seen`), the
//! API is asked only when a watch has not delivered in time.
//!
//! The steps run in order and stop at the first that fails; what the earlier ones achieved
//! (the re-read object, the finalizer, the counts) is reported either way.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tracing::Instrument;

use super::ctx::{OpCtx, emit, nm_event, patch_until_settled};
use super::drain_pass::{DaemonSets, classify_all};
use super::lease_calls::acquire_lease;
use crate::decisions::{self, RecordFinding};
use crate::model::{
    Event, EventTarget, EventType, Lease, Maintenance, NodeRecord, NodeState, Phase, PodList,
    PodRef, reasons,
};
use crate::node::errors::ReconcileError;
use crate::node::seen::{Seen, SeenNode, first_seen};
use crate::node::status::InitialCounts;
use crate::observe::LeaseOp;

/// What a reconcile starts from.
#[derive(Debug, Clone)]
pub(crate) struct ReconcileInput {
    /// Re-read the NodeMaintenance first (a restarted actor's copy may be stale).
    pub refresh: bool,
    /// The finalizers as last seen.
    pub finalizers: Vec<String>,
    /// The status has no phase yet: take the first counts.
    pub first_time: bool,
    /// DaemonSets known to exist or not.
    pub known_daemonsets: DaemonSets,
    /// The Node as its watch delivers it: read instead of a GET.
    pub node: SeenNode,
    /// The pod watch's first list (when `first_time`): the first counts without a LIST.
    pub first_pods: Option<Seen<PodList>>,
    /// The maintenance's own copy of its record of the node (from its status).
    pub record: Option<NodeRecord>,
}

/// How long a reconcile waits for a watch's first delivery before asking the API itself
/// (a watch that cannot list: the API call then fails too, and says why in `lastError`).
const WATCH_FIRST_WAIT: Duration = Duration::from_secs(10);

/// The result of a reconcile sequence.
#[derive(Debug)]
pub struct Reconciled {
    /// The NodeMaintenance as re-read from the API (first run only).
    pub fresh: Option<Maintenance>,
    /// The finalizer was added by this run.
    pub finalizer_added: bool,
    /// First-time counts, when the status had no phase yet.
    pub initial: Option<InitialCounts>,
    /// The node carries this maintenance's record of its prior state: nmo marked it, which it
    /// does only while holding the node lease (so a lease found held by another holder now
    /// was taken from nmo, even when the status saying so never landed).
    pub marked_for_this: bool,
    /// Where it got to.
    pub outcome: Result<ReconcileOutcome, ReconcileError>,
}

/// Where a reconcile sequence that did not fail got to.
// Travels boxed inside `Reconciled`, once per reconcile: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum ReconcileOutcome {
    /// Lease held, node labelled, tainted and cordoned.
    Ready {
        /// The node as written.
        node: NodeState,
        /// Our lease.
        lease: Lease,
        /// What was wrong with the record of the node's prior state found on it, and
        /// replaced (an event on the node said so).
        finding: Option<RecordFinding>,
    },
    /// The NodeMaintenance does not exist any more.
    Gone,
    /// Nothing done: the re-read object is being deleted or already Failed, or the deletion
    /// was seen on the way (never cordon for a deleted maintenance).
    Skipped,
}

fn to_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Runs the sequence; see [`Reconciled`].
pub(crate) async fn reconcile(ctx: OpCtx, input: ReconcileInput) -> Reconciled {
    let mut done = Reconciled {
        fresh: None,
        finalizer_added: false,
        initial: None,
        marked_for_this: false,
        outcome: Ok(ReconcileOutcome::Skipped),
    };
    done.outcome = steps(&ctx, input, &mut done).await;
    done
}

async fn steps(
    ctx: &OpCtx,
    mut input: ReconcileInput,
    done: &mut Reconciled,
) -> Result<ReconcileOutcome, ReconcileError> {
    if input.refresh {
        let Some(nm) = ctx
            .cluster
            .get_maintenance(&ctx.nm_name)
            .await
            .map_err(ReconcileError::ReadMaintenance)?
        else {
            return Ok(ReconcileOutcome::Gone);
        };
        let phase = nm.status.as_ref().and_then(|s| s.phase);
        let stop = nm.deleting || phase == Some(Phase::Failed);
        input.finalizers = nm.finalizers.clone();
        input.first_time = nm.status.as_ref().is_none_or(crate::fleet::awaiting_start);
        input.record = nm.status.as_ref().and_then(|s| s.node_record.clone());
        done.fresh = Some(nm);
        if stop {
            return Ok(ReconcileOutcome::Skipped);
        }
    }
    if !input
        .finalizers
        .iter()
        .any(|f| f == crate::model::FINALIZER)
    {
        ctx.cluster
            .add_finalizer(&ctx.nm_name, &input.finalizers)
            .await
            .map_err(ReconcileError::AddFinalizer)?;
        done.finalizer_added = true;
        emit(
            &ctx.cluster,
            nm_event(
                ctx,
                EventType::Normal,
                reasons::BEGIN,
                format!("Begin a node maintenance for node {}", ctx.node_name),
            ),
        )
        .await;
    }
    if input.first_time {
        let watched = match input.first_pods {
            Some(first) => first_seen(first, WATCH_FIRST_WAIT).await,
            None => None,
        };
        done.initial = Some(count_pods(ctx, watched, &input.known_daemonsets).await?);
    }
    let node = match first_seen(input.node, WATCH_FIRST_WAIT).await {
        Some(node) => node,
        None => ctx
            .cluster
            .get_node(&ctx.node_name)
            .await
            .map_err(ReconcileError::ReadNode)?,
    }
    .ok_or_else(|| ReconcileError::NodeMissing {
        node: ctx.node_name.clone(),
    })?;
    done.marked_for_this = node
        .record
        .as_ref()
        .is_some_and(|record| record.maintenance == ctx.nm_uid);
    let lease = acquire_lease(ctx, &node.uid, LeaseOp::Acquire, input.first_time).await?;
    if ctx.deleting.load(Ordering::SeqCst) {
        // Deleted while we were on the way: never cordon for a deleted maintenance.
        return Ok(ReconcileOutcome::Skipped);
    }
    let (node, finding) = label_taint_cordon(ctx, node, input.record.as_ref()).await?;
    Ok(ReconcileOutcome::Ready {
        node,
        lease,
        finding,
    })
}

/// The first counts: every pod on the node (as the pod watch first listed them, or listed
/// now), and those the drain removes.
async fn count_pods(
    ctx: &OpCtx,
    watched: Option<PodList>,
    known_daemonsets: &DaemonSets,
) -> Result<InitialCounts, ReconcileError> {
    let pods = match watched {
        Some(pods) => pods,
        None => ctx
            .cluster
            .list_pods(&ctx.node_name)
            .await
            .map_err(ReconcileError::ListPods)?,
    };
    let total = to_i32(pods.len());
    let mut learned = DaemonSets::default();
    // A DaemonSet that cannot be looked up counts as existing (its pod is not counted); the
    // drain reports the error when it meets the pod again.
    let mut errors = Vec::new();
    let classified = classify_all(ctx, pods, known_daemonsets, &mut learned, &mut errors).await;
    let pending: Vec<PodRef> = classified
        .iter()
        .filter(|(_, a)| a.is_pending())
        .map(|(p, _)| p.pod_ref())
        .collect();
    Ok(InitialCounts {
        total,
        eviction: to_i32(pending.len()),
        pending,
    })
}

/// Puts the node into maintenance (one patch, retried from a fresh read on a race), with the
/// record of its prior state `record` (the maintenance's copy) says, or a new one (see
/// [`decisions::claim`]). A record found on the node that was not the maintenance's own, and was
/// replaced, is said in a Warning event on the node and returned.
async fn label_taint_cordon(
    ctx: &OpCtx,
    node: NodeState,
    record: Option<&NodeRecord>,
) -> Result<(NodeState, Option<RecordFinding>), ReconcileError> {
    let now = ctx.config.now();
    let span = tracing::info_span!(
        "label_taint_cordon",
        nmo.patched = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    // What the patch that went through found of the record (the build runs once per try).
    let finding = std::sync::Mutex::new(None);
    let build = |n: &NodeState| {
        let claim = decisions::claim(n, &ctx.nm_uid, record);
        *finding.lock().unwrap_or_else(|e| e.into_inner()) = claim.finding;
        decisions::maintenance_patch(n, &ctx.nm_uid, record, now)
    };
    let patched = patch_until_settled(ctx, node, build)
        .instrument(span.clone())
        .await;
    match patched {
        Ok((node, changed)) => {
            span.record("nmo.patched", changed);
            let finding = finding
                .into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .filter(|_| changed);
            if let Some(found) = &finding {
                span.in_scope(|| tracing::warn!(finding = %found.describe(), "record of the node's prior state replaced"));
                emit(&ctx.cluster, record_event(ctx, &node, found)).await;
            }
            Ok((node, finding))
        }
        Err(err) => {
            span.record("otel.status_code", "ERROR");
            span.in_scope(
                || tracing::warn!(error = %err, "cannot label, taint and cordon the node"),
            );
            Err(ReconcileError::Cordon(err))
        }
    }
}

/// The Warning event on the node that says a record of its prior state was replaced.
fn record_event(ctx: &OpCtx, node: &NodeState, found: &RecordFinding) -> Event {
    let written = match found {
        RecordFinding::Missing | RecordFinding::Altered => {
            "written again from the NodeMaintenance's own copy"
        }
        RecordFinding::Unreadable | RecordFinding::Foreign(_) => {
            "replaced by a new one, made from the node as it is"
        }
    };
    Event {
        target: EventTarget::Node {
            name: ctx.node_name.clone(),
            uid: node.uid.clone(),
        },
        type_: EventType::Warning,
        reason: found.reason().to_string(),
        message: format!(
            "Node maintenance {} of node {}: {}; {written}",
            ctx.nm_name,
            ctx.node_name,
            found.describe()
        ),
    }
}

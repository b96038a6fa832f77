//! The slow work of a node actor: sequences of cluster calls, run in spawned tasks whose result
//! is cast back to the actor (so its mailbox, lease ticks included, never waits on the API).
//! Each operation is idempotent and decides from what it reads, never from the actor's memory.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chrono::{DateTime, Utc};
use tracing::Instrument;

use crate::config::Config;
use crate::model::{
    Event, EventTarget, EventType, Lease, Maintenance, NodeOwner, NodeState, PodInfo, PodRef,
    reasons,
};
use crate::observe::{LeaseOp, LeaseResult};
use crate::plan::{self, LeaseAction, PodAction};
use crate::ports::{Cluster, ClusterError};

use super::errors::LeaseProblem;

/// How often an operation retries a write that lost an optimistic-concurrency race before
/// giving up until the next tick.
const CONFLICT_RETRIES: usize = 5;

/// What a node actor's operations need.
#[derive(Clone)]
pub(crate) struct OpCtx {
    pub cluster: Arc<dyn Cluster>,
    pub config: Arc<Config>,
    pub nm_name: String,
    pub nm_uid: String,
    pub node_name: String,
    /// Set as soon as the actor learns of the deletion: an operation in progress then stops
    /// before cordoning anything.
    pub deleting: Arc<AtomicBool>,
}

/// The result of an operation, cast back to the node actor.
#[derive(Debug)]
pub enum OpResult {
    /// Start-up / repair sequence finished.
    Reconciled(Box<Reconciled>),
    /// A drain pass finished.
    Drained(DrainPass),
    /// Undo finished (`finalizer`: whether the finalizer was to be removed too).
    Undone {
        /// The finalizer was part of the undo (deletion), not only the node (failure).
        finalizer: bool,
        /// Ok, or what went wrong (retried on the next tick).
        result: Result<(), String>,
    },
}

/// Pod counts taken the first time a maintenance runs.
#[derive(Debug, Clone)]
pub struct InitialCounts {
    /// Every pod on the node.
    pub total: i32,
    /// Pods the drain removes.
    pub eviction: i32,
    /// Those pods.
    pub pending: Vec<PodRef>,
}

/// The result of a reconcile (start-up or repair) sequence.
#[derive(Debug)]
pub struct Reconciled {
    /// The NodeMaintenance as re-read from the API (first run only).
    pub fresh: Option<Maintenance>,
    /// The finalizer was added by this run.
    pub finalizer_added: bool,
    /// First-time counts, when the status had no phase yet.
    pub initial: Option<InitialCounts>,
    /// Where it got to.
    pub outcome: ReconcileOutcome,
}

/// Where a reconcile sequence got to.
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
    },
    /// The node does not exist.
    NodeMissing,
    /// Someone else holds a valid lease.
    LeaseHeld {
        /// Their identity.
        holder: String,
        /// When their lease expires.
        until: Option<DateTime<Utc>>,
    },
    /// Taking the lease failed (API error).
    LeaseError(String),
    /// Another step failed.
    Error(String),
    /// The NodeMaintenance does not exist any more.
    Gone,
    /// Nothing done: the re-read object is being deleted or already Failed.
    Skipped,
}

/// The result of a drain pass.
#[derive(Debug, Default)]
pub struct DrainPass {
    /// Every pod on the node with what the drain does with it.
    pub pods: Vec<(PodInfo, PodAction)>,
    /// DaemonSet existence learned in this pass.
    pub daemonsets: HashMap<(String, String), bool>,
    /// Failures (listing, deleting), for `lastError`.
    pub errors: Vec<String>,
    /// Uids of the pods deleted by this pass.
    pub deleted: Vec<String>,
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

/// Classifies pods, looking up the DaemonSets it does not know yet.
async fn classify_all(
    ctx: &OpCtx,
    pods: Vec<PodInfo>,
    known: &HashMap<(String, String), bool>,
    learned: &mut HashMap<(String, String), bool>,
    errors: &mut Vec<String>,
) -> Vec<(PodInfo, PodAction)> {
    let mut out = Vec::with_capacity(pods.len());
    for pod in pods {
        let mut action = plan::classify(&pod, None);
        if action == PodAction::CheckDaemonSet
            && let Some(key) = plan::daemonset_of(&pod)
        {
            let exists = match known.get(&key).or_else(|| learned.get(&key)) {
                Some(exists) => Some(*exists),
                None => match ctx.cluster.daemonset_exists(&key.0, &key.1).await {
                    Ok(exists) => {
                        learned.insert(key.clone(), exists);
                        Some(exists)
                    }
                    Err(err) => {
                        errors.push(format!(
                            "cannot look up DaemonSet {}/{}: {err}",
                            key.0, key.1
                        ));
                        // Unknown: treat as managed for now (never delete on a guess).
                        Some(true)
                    }
                },
            };
            action = plan::classify(&pod, exists);
        }
        out.push((pod, action));
    }
    out
}

fn to_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Takes (`op` Acquire) or renews (`op` Renew) the lease, in a span of its own that says how it
/// went. With `probably_absent` (a maintenance starting for the first time) the first attempt
/// creates the lease without reading it first: the create itself fails if a lease exists, and
/// the next attempt then reads it, so nothing is overwritten and the common case costs one
/// request instead of two.
pub(crate) async fn acquire_lease(
    ctx: &OpCtx,
    node_uid: &str,
    op: LeaseOp,
    probably_absent: bool,
) -> Result<Lease, LeaseProblem> {
    let span = match op {
        LeaseOp::Renew => tracing::info_span!(
            "renew_lease",
            result = tracing::field::Empty,
            holder = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        ),
        _ => tracing::info_span!(
            "take_lease",
            result = tracing::field::Empty,
            holder = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        ),
    };
    let outcome = try_lease(ctx, node_uid, probably_absent)
        .instrument(span.clone())
        .await;
    let result = match &outcome {
        Ok(_) => LeaseResult::Ok,
        Err(LeaseProblem::HeldByOther { holder, .. }) => {
            span.record("holder", holder.as_str());
            LeaseResult::HeldByOther
        }
        Err(LeaseProblem::Api(ClusterError::Conflict(_) | ClusterError::AlreadyExists(_))) => {
            LeaseResult::Conflict
        }
        Err(LeaseProblem::Api(_)) => LeaseResult::Error,
    };
    span.record("result", result.as_str());
    if matches!(result, LeaseResult::Conflict | LeaseResult::Error) {
        span.record("otel.status_code", "ERROR");
    }
    ctx.config.observer.lease_operation(op, result);
    outcome
}

async fn try_lease(
    ctx: &OpCtx,
    node_uid: &str,
    probably_absent: bool,
) -> Result<Lease, LeaseProblem> {
    let namespace = &ctx.config.lease_namespace;
    let name = plan::lease_name(&ctx.node_name);
    let mut last = ClusterError::Other("lease retries exhausted".to_string());
    for attempt in 0..CONFLICT_RETRIES {
        let existing = if attempt == 0 && probably_absent {
            None
        } else {
            ctx.cluster
                .get_lease(namespace, &name)
                .await
                .map_err(LeaseProblem::Api)?
        };
        let now = ctx.config.now();
        let action = plan::plan_lease(
            existing.as_ref(),
            namespace,
            &ctx.node_name,
            now,
            ctx.config.lease_duration,
        );
        let result = match action {
            LeaseAction::HeldByOther { holder, until } => {
                return Err(LeaseProblem::HeldByOther { holder, until });
            }
            LeaseAction::Create(lease) => {
                let owner = NodeOwner {
                    name: ctx.node_name.clone(),
                    uid: node_uid.to_string(),
                };
                match ctx.cluster.create_lease(&lease, &owner).await {
                    Err(ClusterError::NotFound(_)) => {
                        // The lease namespace is missing: create it, then try again.
                        ctx.cluster
                            .ensure_namespace(namespace)
                            .await
                            .map_err(LeaseProblem::Api)?;
                        ctx.cluster.create_lease(&lease, &owner).await
                    }
                    other => other,
                }
            }
            LeaseAction::Update(lease) => ctx.cluster.update_lease(&lease).await,
        };
        match result {
            Ok(lease) => return Ok(lease),
            Err(err @ (ClusterError::Conflict(_) | ClusterError::AlreadyExists(_))) => {
                // Someone wrote in between: decide again from a fresh read.
                tracing::info!(error = %err, "lease changed while being written, retrying");
                last = err;
            }
            Err(err) => return Err(LeaseProblem::Api(err)),
        }
    }
    Err(LeaseProblem::Api(last))
}

/// Applies a node patch built from fresh reads until no race defeats it.
async fn patch_until_settled<F>(
    ctx: &OpCtx,
    mut node: NodeState,
    build: F,
) -> Result<(NodeState, bool), ClusterError>
where
    F: Fn(&NodeState) -> Option<crate::model::NodePatch>,
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
                    .ok_or_else(|| ClusterError::NotFound(ctx.node_name.clone()))?;
            }
            Err(err) => return Err(err),
        }
    }
    Err(ClusterError::Conflict(format!(
        "node {} kept changing under the patch",
        ctx.node_name
    )))
}

/// Start-up and repair: finalizer, first-time status counts, node, lease, label+taints+cordon.
pub(crate) async fn reconcile(
    ctx: OpCtx,
    refresh: bool,
    mut finalizers: Vec<String>,
    mut first_time: bool,
    known_daemonsets: HashMap<(String, String), bool>,
) -> Reconciled {
    let mut done = Reconciled {
        fresh: None,
        finalizer_added: false,
        initial: None,
        outcome: ReconcileOutcome::Skipped,
    };
    if refresh {
        match ctx.cluster.get_maintenance(&ctx.nm_name).await {
            Ok(None) => {
                done.outcome = ReconcileOutcome::Gone;
                return done;
            }
            Ok(Some(nm)) => {
                let stop = nm.deleting
                    || nm.status.as_ref().and_then(|s| s.phase)
                        == Some(crate::model::Phase::Failed);
                finalizers = nm.finalizers.clone();
                first_time = nm.status.as_ref().and_then(|s| s.phase).is_none();
                done.fresh = Some(nm);
                if stop {
                    return done;
                }
            }
            Err(err) => {
                done.outcome =
                    ReconcileOutcome::Error(format!("cannot read NodeMaintenance: {err}"));
                return done;
            }
        }
    }
    if !finalizers.iter().any(|f| f == crate::model::FINALIZER) {
        if let Err(err) = ctx.cluster.add_finalizer(&ctx.nm_name, &finalizers).await {
            done.outcome = ReconcileOutcome::Error(format!("cannot add finalizer: {err}"));
            return done;
        }
        done.finalizer_added = true;
        emit(
            &ctx.cluster,
            nm_event(
                &ctx,
                EventType::Normal,
                reasons::BEGIN,
                format!("Begin a node maintenance for node {}", ctx.node_name),
            ),
        )
        .await;
    }
    if first_time {
        match ctx.cluster.list_pods(&ctx.node_name).await {
            Ok(pods) => {
                let total = to_i32(pods.len());
                let mut learned = HashMap::new();
                let mut errors = Vec::new();
                let classified =
                    classify_all(&ctx, pods, &known_daemonsets, &mut learned, &mut errors).await;
                let pending: Vec<PodRef> = classified
                    .iter()
                    .filter(|(_, a)| a.is_pending())
                    .map(|(p, _)| p.pod_ref())
                    .collect();
                done.initial = Some(InitialCounts {
                    total,
                    eviction: to_i32(pending.len()),
                    pending,
                });
            }
            Err(err) => {
                done.outcome = ReconcileOutcome::Error(format!("cannot list pods: {err}"));
                return done;
            }
        }
    }
    let node = match ctx.cluster.get_node(&ctx.node_name).await {
        Ok(Some(node)) => node,
        Ok(None) => {
            done.outcome = ReconcileOutcome::NodeMissing;
            return done;
        }
        Err(err) => {
            done.outcome = ReconcileOutcome::Error(format!("cannot read node: {err}"));
            return done;
        }
    };
    let lease = match acquire_lease(&ctx, &node.uid, LeaseOp::Acquire, first_time).await {
        Ok(lease) => lease,
        Err(LeaseProblem::HeldByOther { holder, until }) => {
            done.outcome = ReconcileOutcome::LeaseHeld { holder, until };
            return done;
        }
        Err(LeaseProblem::Api(err)) => {
            done.outcome = ReconcileOutcome::LeaseError(format!("cannot take lease: {err}"));
            return done;
        }
    };
    if ctx.deleting.load(Ordering::SeqCst) {
        // Deleted while we were on the way: never cordon for a deleted maintenance.
        return done;
    }
    let now = ctx.config.now();
    let span = tracing::info_span!(
        "label_taint_cordon",
        patched = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    let patched = patch_until_settled(&ctx, node, |n| plan::maintenance_patch(n, now))
        .instrument(span.clone())
        .await;
    match patched {
        Ok((node, changed)) => {
            span.record("patched", changed);
            done.outcome = ReconcileOutcome::Ready { node, lease };
        }
        Err(err) => {
            span.record("otel.status_code", "ERROR");
            span.in_scope(
                || tracing::warn!(error = %err, "cannot label, taint and cordon the node"),
            );
            done.outcome = ReconcileOutcome::Error(format!("cannot cordon node: {err}"));
        }
    }
    done
}

/// One drain pass: classify the node's pods, delete the finished and orphaned ones; the actor
/// asks the eviction actor for the rest.
pub(crate) async fn drain_pass(
    ctx: OpCtx,
    snapshot: Option<Vec<PodInfo>>,
    known_daemonsets: HashMap<(String, String), bool>,
    handled: HashSet<String>,
) -> DrainPass {
    let mut pass = DrainPass::default();
    let pods = match snapshot {
        Some(pods) => pods,
        None => match ctx.cluster.list_pods(&ctx.node_name).await {
            Ok(pods) => pods,
            Err(err) => {
                pass.errors.push(format!("cannot list pods: {err}"));
                return pass;
            }
        },
    };
    let mut learned = HashMap::new();
    let mut errors = Vec::new();
    let classified = classify_all(&ctx, pods, &known_daemonsets, &mut learned, &mut errors).await;
    for (pod, action) in &classified {
        if *action != PodAction::Delete
            || handled.contains(&pod.uid)
            || ctx.deleting.load(Ordering::SeqCst)
        {
            continue;
        }
        let span = tracing::info_span!(
            "delete_pod",
            pod.namespace = %pod.namespace,
            pod.name = %pod.name,
        );
        match ctx
            .cluster
            .delete_pod(&pod.namespace, &pod.name, pod.grace_period_seconds)
            .instrument(span)
            .await
        {
            Ok(()) | Err(ClusterError::NotFound(_)) => pass.deleted.push(pod.uid.clone()),
            Err(err) => errors.push(format!(
                "cannot delete pod {}/{}: {err}",
                pod.namespace, pod.name
            )),
        }
    }
    pass.pods = classified;
    pass.daemonsets = learned;
    pass.errors = errors;
    pass
}

/// Takes the node out of maintenance and releases our lease; with `finalizer`, also removes
/// the finalizer and says so (deletion). Never adds anything.
pub(crate) async fn undo(ctx: OpCtx, finalizer: bool) -> Result<(), String> {
    let node = ctx
        .cluster
        .get_node(&ctx.node_name)
        .await
        .map_err(|e| format!("cannot read node: {e}"))?;
    if let Some(node) = node {
        let uid = node.uid.clone();
        let (_, patched) = patch_until_settled(&ctx, node, plan::undo_patch)
            .instrument(tracing::info_span!("uncordon"))
            .await
            .map_err(|e| format!("cannot uncordon node: {e}"))?;
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
    let span = tracing::info_span!("release_lease", result = tracing::field::Empty);
    let released = release_lease(&ctx).instrument(span.clone()).await;
    let result = match &released {
        Ok(result) => *result,
        Err((result, _)) => *result,
    };
    span.record("result", result.as_str());
    ctx.config
        .observer
        .lease_operation(LeaseOp::Release, result);
    released.map_err(|(_, error)| error)?;
    if finalizer {
        ctx.cluster
            .remove_finalizer(&ctx.nm_name)
            .instrument(tracing::info_span!("remove_finalizer"))
            .await
            .map_err(|e| format!("cannot remove finalizer: {e}"))?;
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

/// Deletes our lease; Ok says whether it was ours to delete.
async fn release_lease(ctx: &OpCtx) -> Result<LeaseResult, (LeaseResult, String)> {
    let namespace = &ctx.config.lease_namespace;
    let name = plan::lease_name(&ctx.node_name);
    for _ in 0..CONFLICT_RETRIES {
        let lease = ctx
            .cluster
            .get_lease(namespace, &name)
            .await
            .map_err(|e| (LeaseResult::Error, format!("cannot read lease: {e}")))?;
        let Some(lease) = lease else {
            return Ok(LeaseResult::Ok);
        };
        if !plan::lease_is_ours(&lease) {
            tracing::info!(
                lease = %name,
                holder = ?lease.holder_identity,
                "lease held by someone else, leaving it alone"
            );
            return Ok(LeaseResult::HeldByOther);
        }
        match ctx.cluster.delete_lease(&lease).await {
            Ok(()) | Err(ClusterError::NotFound(_)) => return Ok(LeaseResult::Ok),
            Err(ClusterError::Conflict(error)) => {
                tracing::info!(%error, "lease changed while being released, retrying");
            }
            Err(err) => {
                return Err((LeaseResult::Error, format!("cannot delete lease: {err}")));
            }
        }
    }
    Err((
        LeaseResult::Conflict,
        "lease kept changing while being released".to_string(),
    ))
}

//! Taking, renewing and releasing the node lease.

use tracing::Instrument;

use super::ctx::{CONFLICT_RETRIES, OpCtx, emit, nm_event};
use crate::decisions::{self, LeaseAction};
use crate::model::{EventType, Lease, NodeOwner, Uid, reasons};
use crate::node::errors::{LeaseError, ReleaseError};
use crate::observe::{LeaseOp, LeaseResult};
use crate::ports::ClusterError;

/// Takes (`op` Acquire) or renews (`op` Renew) the lease, in a span of its own that says how it
/// went. With `probably_absent` (a maintenance starting for the first time) the first attempt
/// creates the lease without reading it first: the create itself fails if a lease exists, and
/// the next attempt then reads it, so nothing is overwritten and the common case costs one
/// request instead of two.
pub(crate) async fn acquire_lease(
    ctx: &OpCtx,
    node_uid: &Uid,
    op: LeaseOp,
    probably_absent: bool,
) -> Result<Lease, LeaseError> {
    let span = match op {
        LeaseOp::Renew => tracing::info_span!(
            "renew_lease",
            nmo.result = tracing::field::Empty,
            nmo.lease.holder = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        ),
        _ => tracing::info_span!(
            "take_lease",
            nmo.result = tracing::field::Empty,
            nmo.lease.holder = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        ),
    };
    let outcome = try_lease(ctx, node_uid, probably_absent)
        .instrument(span.clone())
        .await
        .map_err(|problem| match problem {
            Problem::HeldByOther { holder, until } => LeaseError::TakenBy { holder, until },
            Problem::Api(err) if op == LeaseOp::Renew => LeaseError::Renew(err),
            Problem::Api(err) => LeaseError::Take(err),
        });
    let result = match &outcome {
        Ok(_) => LeaseResult::Ok,
        Err(err) => {
            if let LeaseError::TakenBy { holder, .. } = err {
                span.record("nmo.lease.holder", holder.as_str());
            }
            err.result()
        }
    };
    span.record("nmo.result", result.as_str());
    if matches!(result, LeaseResult::Conflict | LeaseResult::Error) {
        span.record("otel.status_code", "ERROR");
    }
    ctx.config.observer.lease_operation(op, result);
    outcome
}

/// Why an attempt to take the lease stopped.
enum Problem {
    HeldByOther {
        holder: String,
        until: Option<chrono::DateTime<chrono::Utc>>,
    },
    Api(ClusterError),
}

async fn try_lease(ctx: &OpCtx, node_uid: &Uid, probably_absent: bool) -> Result<Lease, Problem> {
    let namespace = &ctx.config.lease_namespace;
    let name = decisions::lease_name(&ctx.node_name);
    let mut last = ClusterError::Other("lease retries exhausted".to_string());
    for attempt in 0..CONFLICT_RETRIES {
        let existing = if attempt == 0 && probably_absent {
            None
        } else {
            ctx.cluster
                .get_lease(namespace, &name)
                .await
                .map_err(Problem::Api)?
        };
        let now = ctx.config.now();
        let action = decisions::plan_lease(
            existing.as_ref(),
            namespace,
            &ctx.node_name,
            now,
            ctx.config.lease_duration,
        );
        let result = match action {
            LeaseAction::HeldByOther { holder, until } => {
                return Err(Problem::HeldByOther { holder, until });
            }
            LeaseAction::Create(lease) => {
                let owner = NodeOwner {
                    name: ctx.node_name.clone(),
                    uid: owner_uid(ctx, node_uid).await.map_err(Problem::Api)?,
                };
                match ctx.cluster.create_lease(&lease, &owner).await {
                    Err(ClusterError::NotFound(_)) => {
                        // The lease namespace is missing: create it, then try again.
                        ctx.cluster
                            .ensure_namespace(namespace)
                            .await
                            .map_err(Problem::Api)?;
                        ctx.cluster.create_lease(&lease, &owner).await
                    }
                    other => other,
                }
            }
            LeaseAction::Update(lease) => ctx.cluster.update_lease(&lease).await,
            LeaseAction::TakeOverBogus {
                lease,
                holder,
                ahead,
            } => {
                let message = format!(
                    "The lease {namespace}/{name} of {holder} was renewed {}s ahead of nmo's \
                     clock, more than clock skew explains (its own duration, at most {}s): \
                     taken as expired and taken over",
                    ahead.as_secs(),
                    decisions::MAX_CLOCK_SKEW.as_secs()
                );
                tracing::warn!(lease = %name, %holder, ahead_s = ahead.as_secs(), "{message}");
                emit(
                    &ctx.cluster,
                    nm_event(ctx, EventType::Warning, reasons::BOGUS_LEASE, message),
                )
                .await;
                ctx.cluster.update_lease(&lease).await
            }
        };
        match result {
            Ok(lease) => return Ok(lease),
            Err(err @ (ClusterError::Conflict(_) | ClusterError::AlreadyExists(_))) => {
                // Someone wrote in between: decide again from a fresh read.
                tracing::info!(error = %err, "lease changed while being written, retrying");
                last = err;
            }
            Err(err) => return Err(Problem::Api(err)),
        }
    }
    Err(Problem::Api(last))
}

/// The uid of the node a lease is created for (its owner): `known`, or read when unknown
/// (a renewal of a held drain after a restart that finds the lease gone).
async fn owner_uid(ctx: &OpCtx, known: &Uid) -> Result<Uid, ClusterError> {
    if !known.is_empty() {
        return Ok(known.clone());
    }
    let node = ctx.cluster.get_node(&ctx.node_name).await?;
    node.map(|n| n.uid)
        .ok_or_else(|| ClusterError::NotFound(format!("node {}", ctx.node_name)))
}

/// Deletes our lease (someone else's is left alone); says how it went in the span and the
/// metric.
/// `read` is the lease as just read (None: absent), which saves reading it again.
pub(crate) async fn release_lease(ctx: &OpCtx, read: Option<Lease>) -> Result<(), ReleaseError> {
    let span = tracing::info_span!("release_lease", nmo.result = tracing::field::Empty);
    let released = try_release(ctx, read).instrument(span.clone()).await;
    let result = match &released {
        Ok(result) => *result,
        Err(err) => err.result(),
    };
    span.record("nmo.result", result.as_str());
    ctx.config
        .observer
        .lease_operation(LeaseOp::Release, result);
    released.map(|_| ())
}

/// Deletes our lease; Ok says whether it was ours to delete.
async fn try_release(ctx: &OpCtx, read: Option<Lease>) -> Result<LeaseResult, ReleaseError> {
    let namespace = &ctx.config.lease_namespace;
    let name = decisions::lease_name(&ctx.node_name);
    let mut read = Some(read);
    for _ in 0..CONFLICT_RETRIES {
        let lease = match read.take() {
            Some(lease) => lease,
            None => ctx
                .cluster
                .get_lease(namespace, &name)
                .await
                .map_err(ReleaseError::Read)?,
        };
        let Some(lease) = lease else {
            return Ok(LeaseResult::Ok);
        };
        if !decisions::lease_is_ours(&lease) {
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
            Err(err) => return Err(ReleaseError::Delete(err)),
        }
    }
    Err(ReleaseError::KeptChanging)
}

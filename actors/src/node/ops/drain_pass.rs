//! One drain pass: classify the node's pods, delete the finished ones; the actor asks the
//! eviction actor for the rest (orphaned DaemonSet pods included).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tracing::Instrument;

use super::ctx::OpCtx;
use crate::decisions::{self, PodAction};
use crate::model::{PodInfo, PodList, Uid};
use crate::node::drain::Hashed;
use crate::node::errors::DrainError;
use crate::ports::ClusterError;

pub use crate::node::daemonset_answers::DaemonSets;

/// The result of a drain pass.
#[derive(Debug, Default)]
pub struct DrainPass {
    /// Every pod on the node with what the drain does with it.
    pub pods: Vec<(Arc<PodInfo>, PodAction)>,
    /// DaemonSet existence learned in this pass.
    pub daemonsets: DaemonSets,
    /// Failures (listing, deleting), for `lastError`.
    pub errors: Vec<DrainError>,
    /// Uids of the pods deleted by this pass.
    pub deleted: Vec<Uid>,
}

/// The action for `pod` from the DaemonSets `known`, without a call; None when it takes a
/// lookup (a pod of a DaemonSet not known yet).
pub(crate) fn classify_known(pod: &PodInfo, known: &DaemonSets) -> Option<PodAction> {
    match decisions::classify(pod, None) {
        PodAction::CheckDaemonSet => {
            let exists = known.get(&decisions::daemonset_ref(pod)?)?;
            Some(decisions::classify(pod, Some(exists)))
        }
        action => Some(action),
    }
}

/// Classifies pods, looking up the DaemonSets it does not know yet.
pub(super) async fn classify_all(
    ctx: &OpCtx,
    pods: PodList,
    known: &DaemonSets,
    learned: &mut DaemonSets,
    errors: &mut Vec<DrainError>,
) -> Vec<(Arc<PodInfo>, PodAction)> {
    let mut out = Vec::with_capacity(pods.len());
    for pod in pods {
        let mut action = decisions::classify(&pod, None);
        if action == PodAction::CheckDaemonSet
            && let Some(key) = decisions::daemonset_ref(&pod)
        {
            let exists = match known.get(&key).or_else(|| learned.get(&key)) {
                Some(exists) => exists,
                None => match ctx
                    .cluster
                    .daemonset_exists(&key.namespace, &key.name, &key.uid)
                    .await
                {
                    Ok(exists) => {
                        learned.learn(key.clone(), exists);
                        exists
                    }
                    Err(source) => {
                        errors.push(DrainError::LookUpDaemonSet {
                            namespace: key.namespace.clone(),
                            name: key.name.clone(),
                            source,
                        });
                        // Unknown: treat as managed for now (never delete on a guess).
                        true
                    }
                },
            };
            action = decisions::classify(&pod, Some(exists));
        }
        out.push((pod, action));
    }
    out
}

/// One drain pass over `snapshot` (the pod watch's latest list; None = list them).
pub(crate) async fn drain_pass(
    ctx: OpCtx,
    snapshot: Option<PodList>,
    known_daemonsets: DaemonSets,
    handled: Hashed<Uid>,
) -> DrainPass {
    let mut pass = DrainPass::default();
    let pods = match snapshot {
        Some(pods) => pods,
        None => match ctx.cluster.list_pods(&ctx.node_name).await {
            Ok(pods) => pods,
            Err(err) => {
                pass.errors.push(DrainError::ListPods(err));
                return pass;
            }
        },
    };
    let mut learned = DaemonSets::default();
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
            k8s.namespace.name = %pod.namespace,
            k8s.pod.name = %pod.name,
        );
        match ctx
            .cluster
            .delete_pod(
                &pod.namespace,
                &pod.name,
                &pod.uid,
                pod.grace_period_seconds,
            )
            .instrument(span)
            .await
        {
            Ok(()) | Err(ClusterError::NotFound(_)) => pass.deleted.push(pod.uid.clone()),
            Err(source) => errors.push(DrainError::DeletePod {
                namespace: pod.namespace.to_string(),
                name: pod.name.to_string(),
                source,
            }),
        }
    }
    pass.pods = classified;
    pass.daemonsets = learned;
    pass.errors = errors;
    pass
}

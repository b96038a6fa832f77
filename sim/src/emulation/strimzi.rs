//! Strimzi's Drain Cleaner and Cluster Operator, emulated from strimzi/drain-cleaner's README
//! ("How does it work?") and its webhook (src/main/java/io/strimzi/ValidatingWebhook.java):
//! - The Drain Cleaner's validating webhook on `pods/eviction` sees an eviction of a Kafka
//!   broker pod (`strimzi.io/kind: Kafka`, `strimzi.io/name: <cluster>-kafka`), annotates the
//!   pod `strimzi.io/manual-rolling-update: "true"` and refuses the eviction with a 500 "The pod
//!   will be rolled by the Strimzi Cluster Operator". An eviction whose uid precondition names
//!   another pod than the one of that name is let through untouched ("The request might be old
//!   and should be ignored").
//! - The Strimzi Cluster Operator ([`DrainCleaner`]'s operator) rolls each annotated broker, one
//!   at a time: the pod is deleted and created again with the same name, on another node.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::interceptor::Interceptor;
use super::webhook::{Eviction, Verdict};
use super::{EmulationError, lock, ready, wait_for};

/// The webhook's name in the Drain Cleaner's ValidatingWebhookConfiguration.
pub const WEBHOOK: &str = "strimzi-drain-cleaner.strimzi.io";
const CONFIGURATION: &str = "nmo-sim-emulated-strimzi-drain-cleaner";
/// The annotation that asks the Cluster Operator for a rolling restart.
pub const ROLL_ANNOTATION: &str = "strimzi.io/manual-rolling-update";
/// How often the operator looks for brokers to roll.
const LOOK_EVERY: Duration = Duration::from_millis(100);
/// How long a roll waits for its broker to be gone, then for it to be ready again.
const ROLL_STEP_WITHIN: Duration = Duration::from_secs(20);

/// A Kafka broker pod of cluster `cluster` on `node`.
pub fn broker(
    namespace: &str,
    cluster: &str,
    name: &str,
    node: &str,
) -> Result<Pod, EmulationError> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"strimzi.io/kind": "Kafka", "strimzi.io/cluster": cluster,
                       "strimzi.io/name": format!("{cluster}-kafka")}
        },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "kafka", "image": "registry.invalid/kafka:1"}]
        }
    }))?)
}

/// What the emulated Strimzi did.
#[derive(Debug, Default, Clone)]
pub struct StrimziLog {
    /// Evictions the webhook refused, by broker.
    pub refused: BTreeMap<String, u32>,
    /// Evictions it let through because their uid named an older pod.
    pub stale: u32,
    /// Rolls, by broker.
    pub rolls: BTreeMap<String, u32>,
    /// The uids of the pods the operator deleted (its own rolls).
    pub rolled_uids: HashSet<String>,
}

/// The Drain Cleaner's answer for `eviction`.
async fn review(client: kube::Client, log: Arc<Mutex<StrimziLog>>, eviction: Eviction) -> Verdict {
    let pods: Api<Pod> = Api::namespaced(client, &eviction.namespace);
    let Ok(Some(pod)) = pods.get_opt(&eviction.name).await else {
        return Verdict::Allow;
    };
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let is_broker = labels.get("strimzi.io/kind").map(String::as_str) == Some("Kafka")
        && labels
            .get("strimzi.io/name")
            .is_some_and(|n| n.ends_with("-kafka"));
    if !is_broker {
        return Verdict::Allow;
    }
    if eviction.uid.is_some() && eviction.uid != pod.metadata.uid {
        lock(&log).stale += 1;
        return Verdict::Allow;
    }
    let annotated = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.get(ROLL_ANNOTATION).map(String::as_str) == Some("true"));
    if !annotated {
        let patch = json!({"metadata": {"annotations": {ROLL_ANNOTATION: "true"}}});
        let _ = pods
            .patch(
                &eviction.name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await;
    }
    *lock(&log).refused.entry(eviction.name.clone()).or_default() += 1;
    Verdict::Deny(
        500,
        "The pod will be rolled by the Strimzi Cluster Operator".to_string(),
    )
}

/// Rolls one annotated broker, if there is one.
async fn roll_one(
    pods: &Api<Pod>,
    namespace: &str,
    cluster: &str,
    target: &str,
    log: &Arc<Mutex<StrimziLog>>,
) -> Result<(), EmulationError> {
    let selector = format!("strimzi.io/name={cluster}-kafka");
    let list = pods.list(&ListParams::default().labels(&selector)).await?;
    let Some(pod) = list.items.into_iter().find(|p| {
        p.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(ROLL_ANNOTATION))
    }) else {
        return Ok(());
    };
    let name = pod.metadata.name.clone().unwrap_or_default();
    {
        let mut log = lock(log);
        *log.rolls.entry(name.clone()).or_default() += 1;
        log.rolled_uids
            .insert(pod.metadata.uid.clone().unwrap_or_default());
    }
    pods.delete(&name, &DeleteParams::default().grace_period(0))
        .await?;
    wait_for(pods, &name, ROLL_STEP_WITHIN, |p| p.is_none()).await;
    pods.create(
        &PostParams::default(),
        &broker(namespace, cluster, &name, target)?,
    )
    .await?;
    wait_for(pods, &name, ROLL_STEP_WITHIN, |p| p.is_some_and(ready)).await;
    Ok(())
}

/// The emulated Drain Cleaner and Cluster Operator of one Kafka cluster.
pub struct DrainCleaner(Interceptor<StrimziLog>);

impl DrainCleaner {
    /// Starts the webhook (registered with the API server of `client`) and the operator that
    /// rolls the brokers of `cluster` in `namespace` onto `target`.
    pub async fn start(
        client: &kube::Client,
        namespace: &str,
        cluster: &str,
        target: &str,
    ) -> Result<Self, EmulationError> {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let (namespace, cluster, target) = (
            namespace.to_string(),
            cluster.to_string(),
            target.to_string(),
        );
        let interceptor = Interceptor::start(
            client,
            CONFIGURATION,
            WEBHOOK,
            review,
            |rolled| async move {
                loop {
                    tokio::time::sleep(LOOK_EVERY).await;
                    if let Err(error) =
                        roll_one(&pods, &namespace, &cluster, &target, &rolled).await
                    {
                        tracing::warn!(%error, "emulated rolling restart failed");
                    }
                }
            },
        )
        .await?;
        Ok(DrainCleaner(interceptor))
    }

    /// What it did so far.
    pub fn log(&self) -> StrimziLog {
        self.0.log()
    }

    /// Unregisters the webhook and stops the operator.
    pub async fn stop(self) {
        self.0.stop().await;
    }
}

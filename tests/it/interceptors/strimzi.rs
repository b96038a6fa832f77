//! Strimzi's Drain Cleaner and Cluster Operator, emulated from strimzi/drain-cleaner's README
//! ("How does it work?") and its webhook (src/main/java/io/strimzi/ValidatingWebhook.java):
//! - The Drain Cleaner's validating webhook on `pods/eviction` sees an eviction of a Kafka
//!   broker pod (`strimzi.io/kind: Kafka`, `strimzi.io/name: <cluster>-kafka`), annotates the
//!   pod `strimzi.io/manual-rolling-update: "true"` and refuses the eviction with a 500 "The pod
//!   will be rolled by the Strimzi Cluster Operator". An eviction whose uid precondition names
//!   another pod than the one of that name is let through untouched ("The request might be old
//!   and should be ignored").
//! - The Strimzi Cluster Operator (here the test's `operator`) rolls each annotated broker,
//!   one at a time: the pod is deleted and created again with the same name, on another node.
//! - The brokers' budget is `minAvailable: 2` over the two brokers: it never allows an
//!   eviction on its own.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use nmo_sim::Scenario;
use serde_json::json;

use super::https::{Eviction, Verdict, WebhookServer, unregister};
use super::pods::PodWatch;
use crate::support::{Backend, TestEnv, both_backends, eventually};

/// The webhook's name in the Drain Cleaner's ValidatingWebhookConfiguration.
pub const WEBHOOK: &str = "strimzi-drain-cleaner.strimzi.io";
const CONFIGURATION: &str = "nmo-test-strimzi-drain-cleaner";
const ROLL_ANNOTATION: &str = "strimzi.io/manual-rolling-update";
const CLUSTER: &str = "my-cluster";

fn broker(namespace: &str, name: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"strimzi.io/kind": "Kafka", "strimzi.io/cluster": CLUSTER,
                       "strimzi.io/name": format!("{CLUSTER}-kafka")}
        },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "kafka", "image": "registry.invalid/kafka:1"}]
        }
    }))
    .expect("a valid broker pod")
}

/// What the emulated Strimzi did.
#[derive(Debug, Default)]
struct StrimziLog {
    /// Evictions the webhook refused, by broker.
    refused: BTreeMap<String, u32>,
    /// Evictions it let through because their uid named an older pod.
    stale: u32,
    /// Rolls, by broker.
    rolls: BTreeMap<String, u32>,
    /// The uids of the pods the operator deleted (its own rolls).
    rolled_uids: HashSet<String>,
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
        log.lock().unwrap_or_else(|e| e.into_inner()).stale += 1;
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
    *log.lock()
        .unwrap_or_else(|e| e.into_inner())
        .refused
        .entry(eviction.name.clone())
        .or_default() += 1;
    Verdict::Deny(
        500,
        "The pod will be rolled by the Strimzi Cluster Operator".to_string(),
    )
}

fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The Cluster Operator's rolling restart: one annotated broker at a time is deleted and
/// created again with its name on `target`, and waited for until ready.
fn operator(
    client: kube::Client,
    namespace: String,
    target: String,
    log: Arc<Mutex<StrimziLog>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let pods: Api<Pod> = Api::namespaced(client, &namespace);
        let selector = format!("strimzi.io/name={CLUSTER}-kafka");
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let Ok(list) = pods
                .list(&kube::api::ListParams::default().labels(&selector))
                .await
            else {
                continue;
            };
            let Some(pod) = list.items.into_iter().find(|p| {
                p.metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(ROLL_ANNOTATION))
            }) else {
                continue;
            };
            let name = pod.metadata.name.clone().unwrap_or_default();
            {
                let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
                *log.rolls.entry(name.clone()).or_default() += 1;
                log.rolled_uids
                    .insert(pod.metadata.uid.clone().unwrap_or_default());
            }
            let _ = pods
                .delete(&name, &DeleteParams::default().grace_period(0))
                .await;
            // (Loops, not `eventually`: this runs in a task of its own, which must be Send.)
            for _ in 0..200 {
                if pods.get_opt(&name).await.ok().flatten().is_none() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            pods.create(&PostParams::default(), &broker(&namespace, &name, &target))
                .await
                .expect("the broker is created again");
            for _ in 0..200 {
                if pods
                    .get_opt(&name)
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|p| ready(&p))
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    })
}

/// A NodeMaintenance over two Kafka brokers behind Strimzi's Drain Cleaner and an ordinary pod:
/// the maintenance succeeds, each broker is rolled exactly once (by its operator, onto the
/// other node) and nothing else deletes a broker. The Go operator re-sends its evictions by
/// name to a broker created again elsewhere and rolls each one several times; with the pod's
/// uid as precondition, and its request withdrawn once it left the node, nmo does not.
async fn two_brokers_are_rolled_exactly_once_and_the_drain_succeeds(backend: Backend) {
    let mut env = TestEnv::on(backend)
        .scenario(Scenario::plain(2, 0).pdb(None))
        .namespace("kafka")
        .namespace("apps")
        .pod("apps", "plain-0", "node-0", "plain")
        .start()
        .await;
    let client = env.admin_client();
    let namespace = env.ns("kafka");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    for name in [format!("{CLUSTER}-kafka-0"), format!("{CLUSTER}-kafka-1")] {
        pods.create(
            &PostParams::default(),
            &broker(&namespace, &name, &env.name("node-0")),
        )
        .await
        .expect("a broker is created");
    }
    let budget: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": format!("{CLUSTER}-kafka"), "namespace": namespace},
        "spec": {"minAvailable": 2,
                 "selector": {"matchLabels": {"strimzi.io/name": format!("{CLUSTER}-kafka")}}}
    }))
    .expect("a valid budget");
    Api::<PodDisruptionBudget>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), &budget)
        .await
        .expect("the brokers' budget is created");
    // The budget's status allows nothing before the drain starts: nmo must ask anyway.
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &namespace);
    eventually(
        "the brokers' budget to count both brokers",
        Duration::from_secs(30),
        async || {
            budgets
                .get(&format!("{CLUSTER}-kafka"))
                .await
                .ok()
                .and_then(|b| b.status)
                .is_some_and(|s| {
                    s.expected_pods == 2 && s.current_healthy == 2 && s.disruptions_allowed == 0
                })
        },
    )
    .await;
    let log = Arc::new(Mutex::new(StrimziLog::default()));
    let (hook_client, hook_log) = (client.clone(), log.clone());
    let webhook = WebhookServer::start(move |eviction| {
        review(hook_client.clone(), hook_log.clone(), eviction)
    })
    .await;
    webhook.register(&client, CONFIGURATION, WEBHOOK).await;
    let brokers = PodWatch::start(&client, &namespace, "strimzi.io/kind=Kafka");
    let rolling = operator(
        client.clone(),
        namespace.clone(),
        env.name("node-1"),
        log.clone(),
    );

    env.create_maintenance("nm-0", "node-0").await;
    eventually(
        "nm-0 to be Succeeded",
        Duration::from_secs(60),
        async || env.phase("nm-0").await.as_deref() == Some("Succeeded"),
    )
    .await;
    // Time for a stray request to reach a broker on its new node.
    tokio::time::sleep(Duration::from_secs(6)).await;
    rolling.abort();

    let (rolls, rolled_uids, summary) = {
        let log = log.lock().unwrap_or_else(|e| e.into_inner());
        (
            log.rolls.clone(),
            log.rolled_uids.clone(),
            format!("{log:?}"),
        )
    };
    let once: BTreeMap<String, u32> = [0, 1]
        .iter()
        .map(|i| (format!("{CLUSTER}-kafka-{i}"), 1))
        .collect();
    assert_eq!(rolls, once, "each broker rolled exactly once: {summary}");
    let others = brokers.deleted_while_running(&rolled_uids);
    assert!(
        others.is_empty(),
        "brokers deleted by someone else: {others:?}"
    );
    for name in once.keys() {
        let pod = pods.get(name).await.expect("the broker runs");
        assert_eq!(
            pod.spec.and_then(|s| s.node_name).as_deref(),
            Some(env.name("node-1").as_str())
        );
    }
    assert!(
        !env.pod_exists("apps", "plain-0").await,
        "the ordinary pod was evicted"
    );
    eprintln!("Drain Cleaner: {summary}");
    env.stop_operator().await.expect("clean stop");
    unregister(&client, CONFIGURATION).await;
    drop(webhook);
}

both_backends!(two_brokers_are_rolled_exactly_once_and_the_drain_succeeds);

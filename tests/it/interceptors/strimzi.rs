//! Kafka brokers behind Strimzi's Drain Cleaner, with `nmo_sim::emulation::strimzi`: the
//! Drain Cleaner as strimzi/drain-cleaner's README ("How does it work?") and webhook describe it
//! (annotates the broker for a rolling restart and refuses the eviction with a 500), and the
//! Cluster Operator rolling each annotated broker onto another node under its own name. The
//! brokers' budget (`minAvailable: 2` over two brokers) never allows an eviction on its own.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, PostParams};
use nmo_sim::emulation::pods::PodWatch;
use nmo_sim::emulation::strimzi::{self, DrainCleaner};
use serde_json::json;

use super::{assert_plain_pod_evicted, two_nodes_and_a_plain_pod};
use crate::support::{Backend, Phase, both_backends, eventually};

const CLUSTER: &str = "my-cluster";

/// A NodeMaintenance over two Kafka brokers and an ordinary pod: the maintenance succeeds, each
/// broker is rolled exactly once (by its operator, onto the other node) and nothing else
/// deletes a broker. The Go operator re-sends its evictions by name to a broker created again
/// elsewhere and rolls each one several times; with the pod's uid as precondition, and its
/// request withdrawn once it left the node, nmo does not.
async fn two_brokers_are_rolled_exactly_once_and_the_drain_succeeds(backend: Backend) {
    let mut env = two_nodes_and_a_plain_pod(backend, "kafka").start().await;
    let client = env.admin_client();
    let namespace = env.ns("kafka");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let brokers = [format!("{CLUSTER}-kafka-0"), format!("{CLUSTER}-kafka-1")];
    for name in &brokers {
        let pod = strimzi::broker(&namespace, CLUSTER, name, &env.name("node-0")).expect("a pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("a broker is created");
    }
    let budget: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": format!("{CLUSTER}-kafka"), "namespace": namespace},
        "spec": {"minAvailable": 2,
                 "selector": {"matchLabels": {"strimzi.io/name": format!("{CLUSTER}-kafka")}}}
    }))
    .expect("a valid budget");
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &namespace);
    budgets
        .create(&PostParams::default(), &budget)
        .await
        .expect("the brokers' budget is created");
    // The budget's status allows nothing before the drain starts: nmo must ask anyway.
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
    let cleaner = DrainCleaner::start(&client, &namespace, CLUSTER, &env.name("node-1"))
        .await
        .expect("the emulated Drain Cleaner starts");
    let watch = PodWatch::start(&client, &namespace, "strimzi.io/kind=Kafka");

    env.create_maintenance("nm-0", "node-0").await;
    eventually(
        "nm-0 to be Succeeded",
        Duration::from_secs(60),
        async || env.phase("nm-0").await == Some(Phase::Succeeded),
    )
    .await;
    // The drain ends when the brokers leave node-0; the operator re-creates them on node-1
    // in its own time.
    for name in &brokers {
        eventually(
            &format!("{name} re-created on node-1"),
            Duration::from_secs(30),
            async || {
                pods.get_opt(name).await.ok().flatten().is_some_and(|pod| {
                    pod.spec.and_then(|s| s.node_name).as_deref()
                        == Some(env.name("node-1").as_str())
                })
            },
        )
        .await;
    }
    // Time for a stray request to reach a broker on its new node.
    tokio::time::sleep(Duration::from_secs(6)).await;

    let log = cleaner.log();
    let once: BTreeMap<String, u32> = brokers.iter().map(|b| (b.clone(), 1)).collect();
    assert_eq!(log.rolls, once, "each broker rolled exactly once: {log:?}");
    let others = watch.deleted_while_running(&log.rolled_uids);
    assert!(
        others.is_empty(),
        "brokers deleted by someone else: {others:?}"
    );
    assert_plain_pod_evicted(&env).await;
    eprintln!("Drain Cleaner: {log:?}");
    env.stop_cleanly().await;
    cleaner.stop().await;
}

both_backends!(two_brokers_are_rolled_exactly_once_and_the_drain_succeeds);

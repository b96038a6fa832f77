//! deploy/base/rbac.yaml is enough for everything nmo does, and nmo uses all of it: the simulator
//! enforces the ClusterRole for nmo's service account and answers 403 like a real server.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use nmo::sim::{Rbac, Scenario, SimConfig};

use super::cluster;
use super::harness::{Operator, test_options};

const OPERATOR_USER: &str = "system:serviceaccount:nmo-system:nmo";
const OPERATOR_TOKEN: &str = "operator-token";
const ADMIN_TOKEN: &str = "admin-token";
/// Where nmo runs (its pod's namespace), so where it elects its leader: the leader-election Role
/// of deploy/base/rbac.yaml holds only there.
const OPERATOR_NAMESPACE: &str = "nmo-system";

/// The operator's client as in its pod: its service account's token, its pod's namespace.
fn operator_client(sim: &nmo::sim::SimHandle) -> impl FnOnce() -> kube::Client + Send + 'static {
    let url: http::Uri = sim.base_url().parse().expect("the simulator's URL parses");
    move || {
        let mut config = kube::Config::new(url);
        config.default_namespace = OPERATOR_NAMESPACE.into();
        config.default_retry = false;
        config.auth_info.token = Some(OPERATOR_TOKEN.to_string().into());
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_static(cluster::OPERATOR_AGENT),
        ));
        kube::Client::try_from(config).expect("a client for the simulator")
    }
}

/// The (group, resource, verb) grants of deploy/base/rbac.yaml, subresources as `pods/eviction`.
fn granted() -> BTreeSet<(String, String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/base/rbac.yaml");
    let text = std::fs::read_to_string(path).expect("deploy/base/rbac.yaml is readable");
    let mut grants = BTreeSet::new();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value: serde_json::Value = serde::Deserialize::deserialize(document).expect("YAML");
        for rule in value["rules"].as_array().into_iter().flatten() {
            let strings = |key: &str| -> Vec<String> {
                rule[key]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            };
            for group in strings("apiGroups") {
                for resource in strings("resources") {
                    for verb in strings("verbs") {
                        grants.insert((group.clone(), resource.clone(), verb));
                    }
                }
            }
        }
    }
    grants
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_role_is_sufficient_and_every_grant_is_used() {
    let rbac = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/base/rbac.yaml");
    let mut config = SimConfig::default()
        .scenario(Scenario::new(3, 8))
        .time_scale(0.0)
        .token(OPERATOR_TOKEN, OPERATOR_USER)
        .token(ADMIN_TOKEN, "admin");
    config.rbac = Some(Rbac::from_path(OPERATOR_USER, &rbac).expect("the rules load"));
    let sim = cluster::start_with(config).await;
    let client = cluster::test_client_with_token(&sim, Some(ADMIN_TOKEN));
    // The install creates nmo's namespace (deploy/base/namespace.yaml) before nmo runs.
    let namespace: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": OPERATOR_NAMESPACE}}))
            .expect("a namespace");
    kube::Api::all(client.clone())
        .create(&Default::default(), &namespace)
        .await
        .expect("nmo's namespace is created");
    let options = nmo::operator::OperatorOptions {
        leader_elect: true,
        ..test_options()
    };
    let operator = Operator::start(operator_client(&sim), options);

    // Every kind of pod (DaemonSet, mirror, finished, emptyDir, unmanaged), a lease namespace
    // to create, a maintenance to undo, and a missing node.
    cluster::create_maintenance(&client, "nm-0", "node-0").await;
    cluster::create_maintenance(&client, "nm-ghost", "no-such-node").await;
    cluster::wait_for(
        "the maintenance to succeed",
        Duration::from_secs(30),
        || {
            cluster::phase(&sim, "nm-0").as_deref() == Some("Succeeded")
                && cluster::phase(&sim, "nm-ghost").as_deref() == Some("Failed")
        },
    )
    .await;
    cluster::delete_maintenance(&client, "nm-0").await;
    cluster::wait_until_gone(&sim, "nm-0").await;
    operator.stop().await.expect("clean stop");

    let used: BTreeSet<(String, String, String)> = sim
        .accounting()
        .snapshot()
        .into_iter()
        .filter(|(key, _)| key.user == OPERATOR_USER)
        .map(|(key, _)| {
            let resource = if key.subresource.is_empty() {
                key.resource.clone()
            } else {
                format!("{}/{}", key.resource, key.subresource)
            };
            (key.group.clone(), resource, key.verb.clone())
        })
        .collect();
    let denied = sim.rbac_denials();
    assert!(
        denied.is_empty(),
        "nmo was refused what it needs: {denied:?}"
    );

    // What the operator core does not exercise here: the webhook's budget look-up (its own
    // tests enforce the same file and fail without it) and the patch of a repeated event's
    // series, which a short test does not reach.
    let exercised_elsewhere: BTreeSet<(String, String, String)> = [
        ("policy", "poddisruptionbudgets", "list"),
        ("events.k8s.io", "events", "patch"),
    ]
    .iter()
    .map(|(g, r, v)| (g.to_string(), r.to_string(), v.to_string()))
    .collect();
    let unused: Vec<_> = granted()
        .into_iter()
        .filter(|grant| !used.contains(grant) && !exercised_elsewhere.contains(grant))
        .collect();
    assert!(
        unused.is_empty(),
        "granted but never used (drop them from deploy/base/rbac.yaml): {unused:?}"
    );
    sim.shutdown().await;
}

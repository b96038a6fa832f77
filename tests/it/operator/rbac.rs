//! deploy/base/rbac.yaml is enough for everything nmo does, and nmo uses all of it: enforced for
//! nmo's service account by the simulator (answering 403 like a real server) and by a real
//! API server's RBAC authorizer (its audit log says what nmo asked and what was refused).

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use nmo_sim::Scenario;

use crate::support::{
    Backend, OPERATOR_NAMESPACE, Phase, TestEnv, both_backends, eventually, test_options,
};

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

/// The requests nmo made and the ones refused come from the simulator's accounting, or from
/// the real API server's audit log.
async fn the_cluster_role_is_sufficient_and_every_grant_is_used(backend: Backend) {
    let options = nmo::operator::OperatorOptions {
        leader_elect: true,
        ..test_options()
    };
    let mut env = TestEnv::on(backend)
        .scenario(Scenario::new(3, 8))
        .deployed_rbac()
        // The install creates nmo's namespace (deploy/base/namespace.yaml) before nmo runs.
        .namespace(OPERATOR_NAMESPACE)
        .operator_options(options)
        .start()
        .await;

    // Every kind of pod (DaemonSet, mirror, finished, emptyDir, unmanaged), a lease namespace
    // to create, a maintenance to undo, and a missing node.
    env.create_maintenance("nm-0", "node-0").await;
    env.create_maintenance("nm-ghost", "no-such-node").await;
    eventually(
        "the maintenance to succeed",
        Duration::from_secs(30),
        async || {
            env.phase("nm-0").await == Some(Phase::Succeeded)
                && env.phase("nm-ghost").await == Some(Phase::Failed)
        },
    )
    .await;
    env.end_maintenance("nm-0").await;
    env.stop_cleanly().await;

    let used: BTreeSet<(String, String, String)> = env.operator_requests().into_iter().collect();
    let denied = env.operator_refusals();
    assert!(
        denied.is_empty(),
        "nmo was refused what it needs: {denied:?}"
    );

    // What the operator core does not exercise here: the webhook's budget look-up (its own
    // tests enforce the same file and fail without it), the patch of a repeated event's
    // series, which a short test does not reach, the LISTs of nodes, pods and
    // NodeMaintenances, which the watches only make on an API server without streaming lists
    // (operator::watch_lists; the real backend's etcd is one), and
    // the GET of a node, which only a patch that lost a race makes (operator::faults), and the
    // GET of a NodeMaintenance, which only a stale finalizer list or a restart makes
    // (operator::finalizer, operator::restart). The webhook configurations' LISTs are the
    // watches' too; the VMI watch runs only where KubeVirt is installed
    // (interceptors::kubevirt runs it under the same file).
    let mut exercised_elsewhere: Vec<(&str, &str, &str)> = vec![
        ("policy", "poddisruptionbudgets", "list"),
        (
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
            "list",
        ),
        (
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            "list",
        ),
        ("kubevirt.io", "virtualmachineinstances", "list"),
        ("kubevirt.io", "virtualmachineinstances", "watch"),
        ("events.k8s.io", "events", "patch"),
        ("", "nodes", "list"),
        ("", "nodes", "get"),
        ("nodemaintenance.medik8s.io", "nodemaintenances", "get"),
        ("nodemaintenance.medik8s.io", "nodemaintenances", "list"),
        ("", "pods", "list"),
    ];
    if env.backend() == Backend::Real {
        // The lease namespace exists on the real backend (deploy/base's lease Role lives in
        // it), so nmo never creates it there; the simulator's variant covers these grants.
        exercised_elsewhere.extend([("", "namespaces", "get"), ("", "namespaces", "create")]);
    }
    let exercised_elsewhere: BTreeSet<(String, String, String)> = exercised_elsewhere
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
}

both_backends!(the_cluster_role_is_sufficient_and_every_grant_is_used);

//! Drains of workloads that act on eviction requests, emulated from what their projects
//! document (`nmo_sim::emulation`, whose doc comments cite them), against nmo through the API
//! server's own admission webhooks: the emulations run an HTTPS webhook on `pods/eviction`,
//! which a real kube-apiserver calls, and so does the simulator.
//! - `kubevirt`: KubeVirt's virt-api webhook and migration controller
//!   (kubevirt/kubevirt docs/handling-eviction-requests.md);
//! - `strimzi`: Strimzi's Drain Cleaner and the Cluster Operator's rolling restart
//!   (strimzi/drain-cleaner README, "How does it work?").

use crate::support::{Backend, TestEnv, TestEnvBuilder};

mod kubevirt;
mod plan;
mod strimzi;

/// Two nodes without pods of their own, the namespace `namespace` for the workload under test,
/// and an ordinary pod `apps/plain-0` on node-0 (evicted as any other).
fn two_nodes_and_a_plain_pod(backend: Backend, namespace: &str) -> TestEnvBuilder {
    TestEnv::on(backend)
        .nodes(2, 0)
        .namespace(namespace)
        .namespace_with_pods("apps", "plain", &[("plain-0", "node-0")])
}

/// The ordinary pod of [`two_nodes_and_a_plain_pod`] went, as any other would.
async fn assert_plain_pod_evicted(env: &TestEnv) {
    assert!(
        !env.pod_exists("apps", "plain-0").await,
        "the ordinary pod was evicted"
    );
}

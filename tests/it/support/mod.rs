//! The environment of nmo's end-to-end tests: [`TestEnv`], a cluster with an admin client and
//! nmo running against it, set up by a builder and shut down on drop.
//!
//! Two backends ([`Backend`]): the simulated API server (nmo-sim, one per test, instant
//! kubelet, fault injection, request accounting) and a real kube-apiserver with its controller
//! manager and scheduler (nmo-envtest, from `KUBEBUILDER_ASSETS`; one per test binary, the
//! tests taking turns, a kubelet stand-in playing the kubelet, nmo as its ServiceAccount under
//! deploy/base's RBAC). A test reads and changes the cluster only through the environment's
//! kube clients (`objects`), waits with the one [`eventually`] (`waits` has the common ones),
//! counts nmo's requests with [`TestEnv::count_operator_requests`] (the simulator's accounting
//! or the real API server's audit log), and reaches what only the simulator can do (fault
//! injection, RBAC denials of a custom rule set, a status no controller overwrites) through
//! [`TestEnv::sim`]: a test that calls it is simulator-only.
//!
//! # Writing a test for both backends
//! Write the body once as a function of the backend, then instantiate it with
//! [`both_backends!`]: it makes `<name>::sim` and `<name>::real` tests
//! (`cargo test --test it ::real` runs every real-backend test).
//!
//! ```ignore
//! async fn a_node_is_drained(backend: Backend) {
//!     let mut env = TestEnv::on(backend).nodes(2, 4).start().await;
//!     env.create_maintenance("nm-0", "node-0").await;
//!     env.wait_succeeded("nm-0").await;
//!     assert!(env.event_reasons("nm-0").await.contains(&"BeginMaintenance".into()));
//!     env.stop_cleanly().await;
//! }
//! both_backends!(a_node_is_drained);
//! ```
//!
//! To convert a simulator test: drop its `#[tokio::test]`, give it a `backend: Backend`
//! parameter, write `TestEnv::on(backend)` for `TestEnv::builder()`, add
//! `both_backends!(name);` below it, then mind the names:
//! - The real backend is shared by the tests of the binary, so a test's cluster-scoped names
//!   (nodes, NodeMaintenances, namespaces) get a prefix unique to the test (`node-0` is
//!   `t7-node-0` in the cluster). Every `TestEnv` helper takes the names as the test wrote them
//!   (`env.node("node-0")`, `env.pods_on("node-0")`, `.pod("precious", "db-0", "node-0", ..)`,
//!   `env.get_json::<Pod>(Some("workloads"), ..)`, `.object(..)`'s namespace, name and node).
//!   Where a test compares such a name with what it finds in an object, or builds a request
//!   itself with `env.admin_client()`, it asks the environment: `env.name("node-0")`,
//!   `env.ns("workloads")`. `contains("nm-0")` on a message holds for both. Pod names, and the
//!   shared namespaces `default`, `medik8s-leases` and `nmo-system`, are never prefixed.
//! - nmo runs as its ServiceAccount on the real backend, in `nmo-system`: its leader lease is
//!   in `env.operator_namespace()`, not necessarily `default`.
//! - The real cluster has its own controllers: the node lifecycle controller adds
//!   `node.kubernetes.io/unschedulable` to a cordoned node; the taint manager evicts pods that
//!   do not tolerate a `NoExecute` taint; the scheduler places replacements anywhere they fit;
//!   the garbage collector deletes dependents of a deleted owner. Assert what a real cluster
//!   guarantees, not what the simulator happens to do.
//! - A test that needs `env.sim()` (faults, RBAC denials of a custom rule set) stays a plain
//!   `#[tokio::test]` on the simulator, with a comment saying so. Request counts are not a
//!   reason: `env.count_operator_requests` counts on both.
//!
//! The real backend fails a test with a clear message when its binaries are missing (which,
//! and how to get them: `export KUBEBUILDER_ASSETS=$(../shared/k8s/assets)`). Nothing it
//! starts outlives the test binary, however it ends.
//!
//! Modules:
//! - `commands`: the commands a test runs (kubectl, cargo, nmo), which must succeed.
//! - `backend`: the two backends and the identities (admin, nmo's service account).
//! - `real`: the real backend (the shared control plane, turns, the sweep, the kubelet).
//! - `names`: the test's names and the cluster's.
//! - `env`: [`TestEnv`] and its builder; starting, stopping and killing nmo. The builder says
//!   what a test's cluster has (`nodes(2, 3)`, `precious_pods`, `namespace_with_pods`,
//!   `patched_node`, ...) and how it starts (`start`, `start_idle` without nmo,
//!   `start_with_maintenance`, `start_maintaining` until the node is drained).
//! - `objects`: reading objects as stored and changing them as an admin would.
//! - `waits`: waiting for a [`Phase`] (`wait_succeeded`, `wait_failed`), for a maintenance to be
//!   gone, for a blocked drain, an event or a condition; `maintain` and `end_maintenance`.
//! - `requests`: counting nmo's requests on either backend (accounting or audit log).
//! - `operator`: running nmo in-process, on its own runtime (killable like a crashed process)
//!   or on the test's.

mod backend;
mod commands;
mod env;
mod names;
mod objects;
mod operator;
pub mod real;
mod requests;
mod waits;

pub use backend::{Backend, OPERATOR_AGENT, OPERATOR_NAMESPACE};
pub use commands::assert_success;
pub use env::{TestEnv, TestEnvBuilder};
pub use nmo_envtest::testing::eventually;
pub use objects::{elements, maintenance_object, taint_keys};
pub use operator::{Operator, test_options};
pub use waits::Phase;

/// Instantiates each test body `async fn name(backend: Backend)` twice: as `name::sim` on the
/// simulator and `name::real` on the real API server (see the module docs). On a
/// multi-threaded runtime; `both_backends!(current_thread: name)` runs them on one thread, for a
/// test whose thread-local tracing subscriber must see every span of an nmo running on the
/// test's runtime.
macro_rules! both_backends {
    (current_thread: $($test:ident),+ $(,)?) => {
        $(
            mod $test {
                #[tokio::test(flavor = "current_thread")]
                async fn sim() {
                    super::$test($crate::support::Backend::Sim).await;
                }

                #[tokio::test(flavor = "current_thread")]
                async fn real() {
                    super::$test($crate::support::Backend::Real).await;
                }
            }
        )+
    };
    ($($test:ident),+ $(,)?) => {
        $(
            mod $test {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sim() {
                    super::$test($crate::support::Backend::Sim).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn real() {
                    super::$test($crate::support::Backend::Real).await;
                }
            }
        )+
    };
}
pub(crate) use both_backends;

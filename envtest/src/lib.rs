//! A real Kubernetes control plane for tests and benchmarks: etcd and kube-apiserver, plus
//! kube-controller-manager and kube-scheduler when asked, on loopback ports, with generated
//! certificates, from `KUBEBUILDER_ASSETS` (controller-runtime envtest's convention:
//! `export KUBEBUILDER_ASSETS=$(../shared/k8s/assets)`; left unset, the repository's `assets`
//! script is run to find them).
//!
//! ```ignore
//! use nmo_envtest::{ControlPlane, Identity, unique_name, yaml_files_in};
//!
//! #[tokio::test]
//! async fn nmo_may_list_nodes_but_not_secrets() {
//!     // One control plane per test binary, started by the first test that asks for it.
//!     let cluster = ControlPlane::shared().expect("a control plane");
//!     // The repository's manifests, as packaged: the CRD, and nmo's RBAC enforced for real.
//!     let deploy = yaml_files_in(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/base").as_ref()).unwrap();
//!     cluster.install_crds(&deploy).await.unwrap();
//!     cluster.apply_rbac(&deploy).await.unwrap();
//!     // The tests share the cluster: unique names keep them apart.
//!     let node = unique_name("node");
//!     cluster.register_node(&node, &[("role", "worker")]).await.unwrap();
//!     let namespace = cluster.create_namespace("drain").await.unwrap();
//!
//!     // A kube client belongs to the runtime that builds it: build clients in the test.
//!     let admin = cluster.admin_client().unwrap();
//!     let nmo = cluster.client_as(&Identity::service_account("nmo-system", "nmo")).unwrap();
//!     // For code that runs in a runtime of its own (an operator thread): the config travels.
//!     let config = cluster.client_config(&Identity::service_account("nmo-system", "nmo")).unwrap();
//!     std::thread::spawn(move || { /* its runtime: kube::Client::try_from(config) */ });
//!     // kubectl, or any program in a child process, gets a kubeconfig file.
//!     let listed = cluster.kubectl(&Identity::admin()).unwrap().args(["get", "node", &node]).status();
//!     assert!(listed.unwrap().success());
//! }
//! ```
//!
//! # What it gives
//! - [`ControlPlane::start`] (owned; stopped when dropped) and [`ControlPlane::shared`] /
//!   [`ControlPlane::shared_with`] (one per test binary, in a static). Start blocks the caller
//!   (3-4 s on 2 cores for all four components) and works from sync code and inside a tokio
//!   runtime alike; each component is started on free ports, restarted on fresh ones if another
//!   process takes a port first, and waited for (`/health`, `/readyz`, `/healthz`) with a
//!   deadline. A missing binary or a taken fixed port is an immediate error saying which and how
//!   to get it; a component that dies while starting is an error carrying its log's last lines.
//! - Nothing outlives the process: each component runs under an `sh` wrapper that SIGKILLs it
//!   when a pipe from the test process closes (drop, return from `main`, panic, `kill -9`: the
//!   kernel closes it), and a reaper removes the run directory once they are gone. A run whose
//!   reaper could not finish is cleaned, processes included, by the next start. No `unsafe`.
//! - Identities ([`Identity`]): the admin (`system:masters`), any user with groups, a
//!   ServiceAccount's user. Each gets a client certificate from the cluster's CA, as a
//!   `kube::Config` ([`ControlPlane::client_config`]), a client for the calling runtime
//!   ([`ControlPlane::client_as`], [`ControlPlane::admin_client`]), a kubeconfig file
//!   ([`ControlPlane::kubeconfig_path`]) and a ready `kubectl` ([`ControlPlane::kubectl`]).
//! - A project's manifests applied for real: [`ControlPlane::install_crds`] (waits until
//!   Established) and [`ControlPlane::apply_rbac`] (ServiceAccounts, roles and bindings exactly
//!   as packaged, so `deploy/`'s binding of ServiceAccount `nmo-system/nmo` applies to
//!   `Identity::service_account("nmo-system", "nmo")` under the real RBAC authorizer).
//! - Nodes without a kubelet ([`ControlPlane::register_node`], [`NodeTemplate`]): Ready, with
//!   capacity, kept Ready by renewing their Leases while the controller manager's node lifecycle
//!   controller watches (see [`nodes`]); [`ControlPlane::stop_heartbeat`] makes one go silent.
//! - Faults of its own processes, for tests of how a client lives through them:
//!   [`ControlPlane::kill`] (SIGKILL: connections reset), [`ControlPlane::terminate`] (SIGTERM:
//!   kube-apiserver's graceful shutdown, GOAWAY), [`ControlPlane::restart`] (the API server
//!   again on its port), [`ControlPlane::pause`] / [`ControlPlane::resume`] (SIGSTOP / SIGCONT:
//!   connections stay open and nothing answers, as over a half-open connection; e.g. etcd
//!   frozen under a running API server).
//! - Requests counted from the API server's audit log ([`AuditLog`]: a policy for chosen users,
//!   given through [`Options::extra_args`], and the requests it logged, by user, verb and
//!   resource), where the simulator would count them itself.
//! - Figures for benchmarks: [`ControlPlane::startup`] (start time per component) and
//!   [`ControlPlane::components`] (pids, ports, RSS now and peak). `cargo bench -p nmo-envtest
//!   --bench startup` prints them.
//!
//! # What the API server is started with
//! RBAC authorization, client-certificate authentication against the generated CA, service
//! account tokens signed by a generated key, the service range 10.0.0.0/24, and the
//! `ServiceAccount` admission plugin off (a freshly created namespace has no `default`
//! ServiceAccount until the controller manager makes one; [`Options::service_account_admission`]
//! turns it back on). The controller manager runs every default controller, each under its own
//! ServiceAccount as kubeadm runs it; the scheduler binds pods to registered nodes.
//! [`Options::extra_args`] adds flags to any component.
//!
//! # For the suites built on it
//! - A test environment with a real backend: `ControlPlane::shared()`, `install_crds` and
//!   `apply_rbac` with `yaml_files_in("deploy/base")` (packaging changes are picked up), an admin
//!   client per test runtime, nmo's client built from `client_config(&nmo)` in the operator's
//!   own runtime, `kubeconfig_path` for kubectl, `register_node` per test node, unique names.
//! - A kubelet stand-in: there is none here. Pods stay Pending (bound by the scheduler) and
//!   Terminating (no one confirms they stopped) until a stand-in marks them Running/Ready and
//!   finishes deletions after their grace period: nmo-sim's `kubelet::remote`, with the
//!   simulator's own kubelet rules, run with an admin client. (The API server runs without
//!   the Node authorizer: a `system:node:<name>` identity would have no rights.)
//! - A benchmark against it: `ControlPlane::start(Options::default())` owned by the benchmark,
//!   nodes from [`NodeTemplate`], the operator in a child process with `kubeconfig_path(&nmo)`,
//!   and `components()` for the control plane's own memory next to the operator's.
//!
//! Component logs are in `logs/` of [`ControlPlane::data_dir`] while it runs; set
//! `NMO_ENVTEST_KEEP_LOGS=DIR` ([`Options::keep_logs`]) to keep them after.

mod assets;
pub mod audit;
mod calls;
mod component;
mod control_plane;
mod error;
mod files;
mod identity;
mod kubeconfig;
mod launch;
mod layout;
mod manifests;
mod names;
pub mod nodes;
mod options;
mod pki;
mod process;
mod procfs;
mod rundir;
mod shared;
pub mod testing;

pub use assets::{ASSETS_VAR, assets_dir, script_candidates};
pub use audit::AuditLog;
pub use component::Component;
pub use control_plane::{ComponentInfo, ControlPlane, Startup};
pub use error::{ASSETS_HINT, Error, Result};
pub use identity::{ADMIN_USER, Identity};
pub use manifests::{AppliedRbac, yaml_files_in};
pub use names::unique_name;
pub use nodes::NodeTemplate;
pub use options::{KEEP_LOGS_VAR, Options};
pub use procfs::is_alive;
pub use rundir::{clean_stale, default_base};
pub use shared::SharedError;

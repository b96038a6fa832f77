//! A real Kubernetes control plane for tests and benchmarks: etcd and kube-apiserver, and the
//! controller manager and scheduler when asked, on loopback, from `KUBEBUILDER_ASSETS` (the
//! convention of controller-runtime's envtest; `export KUBEBUILDER_ASSETS=$(../shared/k8s/assets)`,
//! or leave it unset and the repository's `assets` script is run).
//!
//! ```ignore
//! use nmo_envtest::{ControlPlane, Identity, unique_name, yaml_files_in};
//!
//! #[tokio::test]
//! async fn nmo_may_list_nodes_but_not_secrets() {
//!     // One control plane per test binary, started by the first test that asks.
//!     let cluster = ControlPlane::shared().expect("a control plane");
//!     let deploy = yaml_files_in("../deploy".as_ref()).unwrap();
//!     cluster.install_crds(&deploy).await.unwrap();
//!     cluster.apply_rbac(&deploy).await.unwrap();
//!     // Tests share the cluster: unique names keep them apart.
//!     let node = unique_name("node");
//!     cluster.register_node(&node, &[("role", "worker")]).await.unwrap();
//!
//!     // Clients belong to the runtime that builds them: build them in the test.
//!     let admin = cluster.admin_client().unwrap();
//!     let nmo = cluster
//!         .client_as(&Identity::service_account("nmo-system", "nmo"))
//!         .unwrap();
//!     // ... kube::Api calls as admin and as nmo; kubectl as anyone:
//!     let status = cluster
//!         .kubectl(&Identity::admin())
//!         .unwrap()
//!         .args(["get", "node", &node])
//!         .status()
//!         .unwrap();
//!     assert!(status.success());
//! }
//! ```
//!
//! What it gives:
//! - [`ControlPlane::start`] (owned, stopped when dropped) and [`ControlPlane::shared`] (one per
//!   test binary). Either way nothing outlives the process: every component runs under a
//!   wrapper that SIGKILLs it when the test process ends, however it ends (return, panic,
//!   `kill -9`), and a reaper removes the run directory; a run whose reaper could not finish
//!   is cleaned by the next start.
//! - Identities and their credentials ([`Identity`]: admin, any user, a ServiceAccount),
//!   as kube client configurations, clients for the calling runtime, kubeconfig files, and a
//!   ready `kubectl` command.
//! - A project's manifests applied for real: [`ControlPlane::install_crds`] (waits for
//!   Established) and [`ControlPlane::apply_rbac`] (the packaged roles and bindings, enforced
//!   by the real RBAC authorizer).
//! - Nodes without a kubelet ([`ControlPlane::register_node`], [`NodeTemplate`]), kept Ready
//!   by renewing their Leases (see [`nodes`]).
//! - Start times and memory of each component ([`ControlPlane::startup`],
//!   [`ControlPlane::components`]), for benchmarks.
//!
//! Pods stay Pending or Terminating until something plays the kubelet: this crate has none.

mod assets;
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

pub use assets::{ASSETS_VAR, assets_dir, script_candidates};
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

//! The environment of nmo's end-to-end tests: [`TestEnv`], a cluster with an admin client and
//! nmo running against it, set up by a builder and shut down on drop.
//!
//! Built for two backends: today the simulated API server (nmo-sim), soon also a real
//! kube-apiserver. A test reads and changes the cluster only through the environment's kube
//! clients (`objects`), waits with the one [`eventually`] (`waits` has the common ones), and
//! reaches what only the simulator can do (fault injection, request accounting, RBAC denials,
//! the instant kubelet) through [`TestEnv::sim`]: a test that calls it is simulator-only.
//!
//! - `backend`: starting the cluster, and the identities (admin, nmo's service account).
//! - `env`: [`TestEnv`] and its builder; starting, stopping and killing nmo.
//! - `objects`: reading objects as stored and changing them as an admin would.
//! - `waits`: waiting for a phase, for a maintenance to be gone, for a blocked drain.
//! - `operator`: running nmo in-process, on its own runtime (killable like a crashed process)
//!   or on the test's.

mod backend;
mod env;
mod objects;
mod operator;
mod waits;

pub use backend::{OPERATOR_AGENT, OPERATOR_NAMESPACE, OPERATOR_USER};
pub use env::{TestEnv, TestEnvBuilder};
pub use nmo_sim::testing::eventually;
pub use objects::taint_keys;
pub use operator::{Operator, test_options};

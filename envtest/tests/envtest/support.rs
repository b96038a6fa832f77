//! What the tests share: the binary's control plane and small waits.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nmo_envtest::{Component, ComponentInfo, ControlPlane, Options};

/// Node heartbeats every 2 s and a 10 s grace period, so that a node without heartbeats is
/// seen lost within a test's patience while heartbeating nodes must keep up.
pub fn shared_options() -> Options {
    Options {
        node_heartbeat_interval: Duration::from_secs(2),
        node_monitor_grace_period: Some(Duration::from_secs(10)),
        ..Options::default()
    }
}

/// The binary's control plane (every component).
pub fn cluster() -> &'static ControlPlane {
    ControlPlane::shared_with(&shared_options()).expect("the shared control plane starts")
}

/// The repository's deploy/base directory (the manifests every install applies).
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/base")
}

/// A fresh directory under the temporary directory, for control planes of a test's own.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nmo-envtest-it-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// The HTTP status of a kube error, if the API answered.
pub fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// What `control_plane` reports of its running `component`, if it runs.
pub fn component_of(control_plane: &ControlPlane, component: Component) -> Option<ComponentInfo> {
    control_plane
        .components()
        .into_iter()
        .find(|c| c.component == component)
}

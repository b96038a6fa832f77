//! What to start and how.

use std::path::PathBuf;
use std::time::Duration;

use crate::component::Component;

/// How a [`crate::ControlPlane`] is started. `Options::default()` starts every component.
#[derive(Clone, Debug)]
pub struct Options {
    /// Start kube-controller-manager: ReplicaSets replace evicted pods, the garbage collector
    /// deletes dependents, the disruption controller keeps PodDisruptionBudget status, the node
    /// lifecycle controller watches node heartbeats (see [`crate::ControlPlane::register_node`]).
    pub controller_manager: bool,
    /// Start kube-scheduler: pods are bound to registered nodes.
    pub scheduler: bool,
    /// The binaries' directory; unset: `KUBEBUILDER_ASSETS`, else the `assets` script.
    pub assets: Option<PathBuf>,
    /// The parent of the run directory; unset: /dev/shm/nmo-envtest (or the temp directory).
    pub base_dir: Option<PathBuf>,
    /// A fixed port for the API server (a taken port is an error); unset: a free one.
    pub apiserver_port: Option<u16>,
    /// How long each component may take to become ready.
    pub start_timeout: Duration,
    /// How often registered nodes' leases are renewed (the kubelet's default is 10 s).
    pub node_heartbeat_interval: Duration,
    /// The controller manager's `--node-monitor-grace-period` (how long a node may miss
    /// heartbeats before it is marked NotReady and tainted); unset: its default, 50 s.
    pub node_monitor_grace_period: Option<Duration>,
    /// Keep the API server's `ServiceAccount` admission plugin. Off by default: it refuses pods
    /// in a namespace until the controller manager has created its `default` ServiceAccount,
    /// a race every freshly created test namespace would run.
    pub service_account_admission: bool,
    /// More flags for a component, appended after the harness's own.
    pub extra_args: Vec<(Component, String)>,
    /// Where to copy the component logs when the run directory is removed (each run in a
    /// subdirectory named like it); default: `NMO_ENVTEST_KEEP_LOGS`, unset: nowhere.
    pub keep_logs: Option<PathBuf>,
}

/// The variable naming a directory to keep component logs in ([`Options::keep_logs`]).
pub const KEEP_LOGS_VAR: &str = "NMO_ENVTEST_KEEP_LOGS";

impl Default for Options {
    fn default() -> Options {
        Options {
            controller_manager: true,
            scheduler: true,
            assets: None,
            base_dir: None,
            apiserver_port: None,
            start_timeout: Duration::from_secs(90),
            node_heartbeat_interval: Duration::from_secs(10),
            node_monitor_grace_period: None,
            service_account_admission: false,
            extra_args: Vec::new(),
            keep_logs: std::env::var_os(KEEP_LOGS_VAR)
                .filter(|dir| !dir.is_empty())
                .map(PathBuf::from),
        }
    }
}

impl Options {
    /// etcd and kube-apiserver only (what controller-runtime's envtest starts).
    pub fn api_only() -> Options {
        Options {
            controller_manager: false,
            scheduler: false,
            ..Options::default()
        }
    }

    /// Whether `component` is to run.
    pub fn wants(&self, component: Component) -> bool {
        match component {
            Component::Etcd | Component::ApiServer => true,
            Component::ControllerManager => self.controller_manager,
            Component::Scheduler => self.scheduler,
        }
    }

    /// The extra flags for `component`.
    pub(crate) fn extra_args_of(&self, component: Component) -> impl Iterator<Item = &str> {
        self.extra_args
            .iter()
            .filter(move |(of, _)| *of == component)
            .map(|(_, arg)| arg.as_str())
    }
}

//! Everything that can go wrong, each error saying what is missing and how to get it.

use std::path::PathBuf;
use std::time::Duration;

use crate::component::Component;

/// How to get the binaries, repeated in every error about them.
pub const ASSETS_HINT: &str = "lay them out with `export KUBEBUILDER_ASSETS=$(../shared/k8s/assets)` \
     (from the repository root; /work/shared/k8s/assets on the development machines)";

/// An error of the control plane or of one of its helpers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `KUBEBUILDER_ASSETS` is unset and no `assets` script was found to lay the binaries out.
    #[error("no Kubernetes binaries: KUBEBUILDER_ASSETS is unset and no assets script was found (looked at {looked_at}); {hint}", hint = ASSETS_HINT)]
    NoAssets {
        /// The script paths tried.
        looked_at: String,
    },
    /// The `assets` script ran but failed.
    #[error("the assets script {script} failed ({status}): {stderr}; {hint}", hint = ASSETS_HINT)]
    AssetsScript {
        /// The script.
        script: PathBuf,
        /// How it ended.
        status: String,
        /// The end of what it printed on stderr.
        stderr: String,
    },
    /// A binary the control plane needs is not in the assets directory.
    #[error("`{binary}` is missing from {dir} (KUBEBUILDER_ASSETS) or is not executable; {hint}", dir = dir.display(), hint = ASSETS_HINT)]
    MissingBinary {
        /// The binary's file name.
        binary: &'static str,
        /// The assets directory.
        dir: PathBuf,
    },
    /// A port asked for explicitly is taken (free ports picked by the harness are retried instead).
    #[error(
        "port {port} for {component} on 127.0.0.1 is already in use; pick another or leave it unset to get a free one"
    )]
    PortInUse {
        /// The component that was to listen on it.
        component: Component,
        /// The port.
        port: u16,
    },
    /// A component exited while starting (or, from [`crate::ControlPlane::check_alive`], since).
    #[error(
        "{component} exited ({status}); the last lines of its log (set NMO_ENVTEST_KEEP_LOGS=DIR to keep the logs):\n{tail}"
    )]
    ComponentDied {
        /// The component.
        component: Component,
        /// Its exit status.
        status: String,
        /// Its log file (removed with the run directory).
        log: PathBuf,
        /// The last lines of its log.
        tail: String,
    },
    /// A component did not become ready before the deadline.
    #[error(
        "{component} was not ready after {waited:?} (last answer: {last}); the last lines of its log (set NMO_ENVTEST_KEEP_LOGS=DIR to keep the logs):\n{tail}"
    )]
    NotReady {
        /// The component.
        component: Component,
        /// How long it was given.
        waited: Duration,
        /// The last answer of its health endpoint, or why there was none.
        last: String,
        /// Its log file.
        log: PathBuf,
        /// The last lines of its log.
        tail: String,
    },
    /// A signal could not be delivered to a component (it is gone, say).
    #[error("cannot send SIG{signal} to {component}: {reason}")]
    Signal {
        /// The component.
        component: Component,
        /// The signal's name.
        signal: String,
        /// What `kill` said.
        reason: String,
    },
    /// A fault was asked of a component that is not running (or, for a restart, still runs).
    #[error("{component}: {reason}")]
    Fault {
        /// The component.
        component: Component,
        /// Why the fault cannot be applied.
        reason: String,
    },
    /// Starting a process failed.
    #[error("cannot start {what}: {source}")]
    Spawn {
        /// What was started.
        what: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// A file or directory operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// A certificate or key could not be generated.
    #[error("generating {what}: {source}")]
    Certificate {
        /// Which certificate.
        what: String,
        /// Why it failed.
        #[source]
        source: rcgen::Error,
    },
    /// An identity has more groups than a client certificate of this harness carries.
    #[error("identity {user}: its client certificate carries at most two groups, not {groups}")]
    TooManyGroups {
        /// The user.
        user: String,
        /// How many groups were asked for.
        groups: usize,
    },
    /// A kube client could not be built.
    #[error("building a kube client: {0}")]
    Client(#[source] kube::Error),
    /// A client was asked for outside a tokio runtime (a kube client belongs to the runtime
    /// that builds it).
    #[error(
        "a kube client must be built inside the tokio runtime that uses it, and none is running here"
    )]
    NoRuntime,
    /// An API request failed.
    #[error("{context}: {source}")]
    Api {
        /// What was being done.
        context: String,
        /// Why it failed.
        #[source]
        source: kube::Error,
    },
    /// An API request or a wait did not finish in time.
    #[error("{what} did not finish within {waited:?}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// The deadline.
        waited: Duration,
    },
    /// A manifest could not be read or is not what it should be.
    #[error("manifest {path}: {reason}", path = path.display())]
    Manifest {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A value could not be (de)serialized.
    #[error("{context}: {source}")]
    Json {
        /// What was being converted.
        context: String,
        /// Why it failed.
        #[source]
        source: serde_json::Error,
    },
    /// A value could not be written as YAML.
    #[error("{context}: {source}")]
    Yaml {
        /// What was being converted.
        context: String,
        /// Why it failed.
        #[source]
        source: serde_yaml::Error,
    },
    /// The control plane's background runtime is gone (the control plane is being dropped).
    #[error("the control plane is stopping")]
    Stopping,
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn api(context: impl Into<String>, source: kube::Error) -> Error {
        Error::Api {
            context: context.into(),
            source,
        }
    }
}

/// Results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

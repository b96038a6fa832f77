//! Why a benchmark scenario could not run.

/// A failed benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Setting up the cluster or driving the maintenances failed.
    #[error(transparent)]
    Demo(#[from] crate::demo::DemoError),
    /// The simulator failed.
    #[error("simulated cluster: {0}")]
    Sim(#[from] nmo_sim::SimError),
    /// A scenario's own objects could not be added to the cluster.
    #[error("cannot set the scenario up ({what}): {source}")]
    Setup {
        /// What was being added.
        what: String,
        /// The API's answer.
        #[source]
        source: kube::Error,
    },
    /// A workload's emulation (KubeVirt's) could not start.
    #[error("emulated workload: {0}")]
    Emulation(#[from] nmo_sim::emulation::EmulationError),
    /// The operator binary could not be started.
    #[error("cannot start {binary}: {source}")]
    Spawn {
        /// The binary.
        binary: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The operator process exited by itself.
    #[error("nmo run exited early; its log is {0}")]
    OperatorExited(String),
    /// The operator's figures could not be read from /proc.
    #[error(transparent)]
    Proc(#[from] super::procstat::ProcError),
    /// A file could not be written.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The fault soak ran, and a check failed (the report above says which).
    #[error("the fault soak failed a check: {0}")]
    SoakFailed(String),
    /// The driver could not read what it measures.
    #[error("cannot {what}: {source}")]
    Kube {
        /// What it read.
        what: String,
        /// Why it failed.
        #[source]
        source: kube::Error,
    },
    /// The results could not be written as JSON.
    #[error("cannot write JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The real control plane failed (binaries missing, a component died, a call failed).
    #[error("real API server: {0}")]
    Envtest(Box<nmo_envtest::Error>),
    /// The scenario could not be seeded on the real API server.
    #[error("seeding the real API server: {0}")]
    Seed(Box<nmo_sim::api_seed::SeedError>),
    /// Running the real backend's work off the runtime failed.
    #[error("real API server: {0}")]
    Real(String),
}

impl From<nmo_envtest::Error> for BenchError {
    fn from(error: nmo_envtest::Error) -> BenchError {
        BenchError::Envtest(Box::new(error))
    }
}

impl From<nmo_sim::api_seed::SeedError> for BenchError {
    fn from(error: nmo_sim::api_seed::SeedError) -> BenchError {
        BenchError::Seed(Box::new(error))
    }
}

//! The cluster behind a [`TestEnv`](super::TestEnv), and the two identities tests use on it:
//! an admin (the test itself) and nmo's service account.
//!
//! Two backends ([`Backend`]): the simulated API server, one per test, in this process; and a
//! real kube-apiserver with its controller manager and scheduler (nmo-envtest), one per test
//! binary, shared by the tests one at a time (see `real`).

use std::path::PathBuf;

use nmo_sim::{ClientOptions, Rbac, Scenario, SimConfig, SimHandle, Simulator};

/// The User-Agent of nmo's client, so its requests are counted apart.
pub const OPERATOR_AGENT: &str = "nmo-operator";
/// The User-Agent of the test's own (admin) client.
pub const ADMIN_AGENT: &str = "nmo-test";
/// The user nmo runs as when RBAC is enforced: the service account of `deploy/`.
pub const OPERATOR_USER: &str = "system:serviceaccount:nmo-system:nmo";
/// Where nmo runs when RBAC is enforced (its pod's namespace), so where it elects its leader:
/// the leader-election Role of deploy/base/rbac.yaml holds only there.
pub const OPERATOR_NAMESPACE: &str = "nmo-system";
const OPERATOR_TOKEN: &str = "operator-token";
const ADMIN_TOKEN: &str = "admin-token";
const ADMIN_USER: &str = "admin";

/// What the cluster must be before a test starts.
#[derive(Default)]
pub struct ClusterSpec {
    /// Nodes and workloads to start with.
    pub scenario: Option<Scenario>,
    /// RBAC manifests (roles and their bindings) for nmo's service account; nmo runs with
    /// exactly these rights, in its namespace [`OPERATOR_NAMESPACE`] as in its pod (the admin
    /// keeps every right). `None`: nmo may do anything, in `default`. (On the real backend nmo
    /// always runs as its service account under deploy/base's RBAC, whatever this says.)
    pub rbac: Option<PathBuf>,
    /// Nothing acts in the cluster on its own: no kubelet, no controllers, so objects keep the
    /// status they are given (what a bare kube-apiserver is anyway). On the real backend: no
    /// kubelet (its controllers run regardless).
    pub static_cluster: bool,
}

/// Which API server a test runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The simulated API server (nmo-sim): fast, with fault injection and request accounting.
    Sim,
    /// A real kube-apiserver, controller manager and scheduler from `KUBEBUILDER_ASSETS`, with
    /// the kubelet stand-in; nmo runs as its ServiceAccount under deploy/base's RBAC.
    Real,
}

/// A started cluster.
pub enum Cluster {
    /// The simulated API server in this process, with an instant kubelet (time scale 0) and its
    /// controllers on their own thread.
    Sim(SimHandle),
    /// The test's share of the binary's real control plane.
    Real(super::real::RealCluster),
}

/// A started backend and how to reach it.
pub struct Started {
    pub cluster: Cluster,
    /// A client configuration for the test itself, allowed everything.
    pub admin: kube::Config,
    /// A client configuration for nmo (its service account when RBAC is enforced).
    pub operator: kube::Config,
    /// The same identity as a kubeconfig file's YAML, for nmo started as a process.
    pub operator_kubeconfig: String,
    /// The admin's identity as a kubeconfig file's YAML, for kubectl.
    pub admin_kubeconfig: String,
}

impl Backend {
    /// Starts this backend's cluster for one test.
    pub async fn start(self, spec: ClusterSpec) -> Started {
        match self {
            Backend::Sim => Box::pin(Backend::simulator(spec)).await,
            Backend::Real => {
                // Boxed: the start of a real backend is a large future.
                let started = Box::pin(super::real::RealCluster::start(spec)).await;
                Started {
                    cluster: Cluster::Real(started.cluster),
                    admin: started.admin,
                    operator: started.operator,
                    operator_kubeconfig: started.operator_kubeconfig,
                    admin_kubeconfig: started.admin_kubeconfig,
                }
            }
        }
    }

    /// Starts the simulated API server with the NodeMaintenance CRD installed.
    pub async fn simulator(spec: ClusterSpec) -> Started {
        let mut config = SimConfig::default()
            .crd(&nmo::crd::definition())
            .expect("the CRD serializes")
            .time_scale(0.0);
        config.scenario = spec.scenario;
        config.controllers = !spec.static_cluster;
        let tokens = spec.rbac.is_some();
        if let Some(path) = &spec.rbac {
            config = config
                .token(OPERATOR_TOKEN, OPERATOR_USER)
                .token(ADMIN_TOKEN, ADMIN_USER);
            config.rbac = Some(Rbac::from_path(OPERATOR_USER, path).expect("the rules load"));
        }
        let sim = Simulator::start(config)
            .await
            .expect("the simulator starts");
        let identity = |agent: &str, token: &str| ClientOptions {
            user_agent: agent.into(),
            token: tokens.then(|| token.to_string()),
            ..ClientOptions::default()
        };
        let admin = sim
            .kube_config_with(&identity(ADMIN_AGENT, ADMIN_TOKEN))
            .expect("a client configuration for the admin");
        let mut operator = sim
            .kube_config_with(&identity(OPERATOR_AGENT, OPERATOR_TOKEN))
            .expect("a client configuration for nmo");
        if tokens {
            operator.default_namespace = OPERATOR_NAMESPACE.into();
        }
        let operator_kubeconfig = nmo_sim::kubeconfig::kubeconfig_yaml(
            &sim.base_url(),
            tokens.then_some(OPERATOR_TOKEN),
            &operator.default_namespace,
        );
        let admin_kubeconfig = nmo_sim::kubeconfig::kubeconfig_yaml(
            &sim.base_url(),
            tokens.then_some(ADMIN_TOKEN),
            "default",
        );
        Started {
            cluster: Cluster::Sim(sim),
            admin,
            operator,
            operator_kubeconfig,
            admin_kubeconfig,
        }
    }
}

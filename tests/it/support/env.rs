//! [`TestEnv`]: a cluster, an admin client and nmo running against it, set up by a builder and
//! shut down on drop (the operator first, killed as a crash would, then the cluster).

use std::path::PathBuf;
use std::time::Duration;

use nmo::operator::{OperatorError, OperatorOptions};
use nmo_sim::{Scenario, SimHandle};
use serde_json::Value;

use super::backend::{Backend, ClusterSpec, Started};
use super::operator::{Operator, test_options};

/// A cluster with nmo running against it.
///
/// Tests read and change the cluster through the admin client only (the methods of `objects`
/// and `waits`), never through a backend's storage, so they can run against a real API server
/// too. What only the simulator can do is behind [`TestEnv::sim`].
pub struct TestEnv {
    // Declared first so it is dropped (killed) before the cluster goes.
    operator: Option<Operator>,
    /// The test's own client, allowed everything (the `objects` methods use it).
    pub(super) admin: kube::Client,
    operator_config: kube::Config,
    operator_kubeconfig: String,
    admin_kubeconfig: String,
    options: OperatorOptions,
    placement: Placement,
    backend: Backend,
}

/// Where the operators of an environment run.
#[derive(Clone, Copy)]
enum Placement {
    /// A runtime of their own, on their own thread: a kill is a crash.
    OwnRuntime,
    /// Tasks of the test's runtime: their spans reach the test's thread-local subscriber.
    TestRuntime,
}

/// Something created through the admin client before the operator starts.
enum Seed {
    Namespace(String),
    Pod {
        namespace: String,
        name: String,
        node: String,
        app: String,
    },
    Pdb {
        namespace: String,
        name: String,
        app: String,
        min_available: i32,
    },
    ForeignLease {
        node: String,
        holder: String,
        renewed_ago: Duration,
    },
    Maintenance {
        name: String,
        node: String,
    },
    Object(Value),
}

/// Sets up a [`TestEnv`]: the cluster, what is in it, and how nmo runs.
#[must_use = "nothing starts until `start().await`"]
pub struct TestEnvBuilder {
    cluster: ClusterSpec,
    seeds: Vec<Seed>,
    operator: Option<OperatorOptions>,
    placement: Placement,
}

impl TestEnv {
    /// An empty cluster with the NodeMaintenance CRD and nmo with [`test_options`].
    pub fn builder() -> TestEnvBuilder {
        TestEnvBuilder {
            cluster: ClusterSpec::default(),
            seeds: Vec::new(),
            operator: Some(test_options()),
            placement: Placement::OwnRuntime,
        }
    }

    /// A new client with the admin's identity (allowed everything), for kinds the `objects`
    /// methods do not cover.
    pub fn admin_client(&self) -> kube::Client {
        self.admin.clone()
    }

    /// A new client with nmo's identity, on the calling runtime.
    pub fn operator_client(&self) -> kube::Client {
        kube::Client::try_from(self.operator_config.clone()).expect("a client for nmo")
    }

    /// Writes a kubeconfig file with nmo's identity (its service account and namespace when
    /// RBAC is enforced), for nmo started as a process of its own.
    pub fn write_operator_kubeconfig(&self, path: &std::path::Path) {
        std::fs::write(path, &self.operator_kubeconfig).expect("the kubeconfig is written");
    }

    /// Writes a kubeconfig file with the admin's identity, for kubectl.
    pub fn write_admin_kubeconfig(&self, path: &std::path::Path) {
        std::fs::write(path, &self.admin_kubeconfig).expect("the kubeconfig is written");
    }

    /// Starts nmo with the builder's options (after a stop or a kill).
    pub fn start_operator(&mut self) {
        assert!(
            self.operator.is_none(),
            "nmo already runs: stop or kill it first"
        );
        self.operator = Some(self.spawn_operator(self.options.clone()));
    }

    /// Starts one more replica of nmo, owned by the test (killed when dropped).
    pub fn start_another_operator(&self, options: OperatorOptions) -> Operator {
        self.spawn_operator(options)
    }

    /// Stops nmo as SIGTERM would and returns how it ended.
    pub async fn stop_operator(&mut self) -> Result<(), OperatorError> {
        self.operator
            .take()
            .expect("nmo runs in this environment")
            .stop()
            .await
    }

    /// Kills nmo mid-flight, as a crash would.
    pub async fn kill_operator(&mut self) {
        self.operator
            .take()
            .expect("nmo runs in this environment")
            .kill()
            .await;
    }

    /// The simulated API server, for what only it can do: fault injection, request accounting,
    /// RBAC denials, the instant kubelet. A test that calls this runs on the simulator only.
    pub fn sim(&self) -> &SimHandle {
        let Backend::Sim(sim) = &self.backend;
        sim
    }

    fn spawn_operator(&self, options: OperatorOptions) -> Operator {
        let config = self.operator_config.clone();
        match self.placement {
            Placement::OwnRuntime => Operator::start(
                move || kube::Client::try_from(config).expect("a client for nmo"),
                options,
            ),
            Placement::TestRuntime => Operator::spawn_here(
                kube::Client::try_from(config).expect("a client for nmo"),
                options,
            ),
        }
    }
}

impl TestEnvBuilder {
    /// The nodes and workloads the cluster starts with.
    pub fn scenario(mut self, scenario: Scenario) -> Self {
        self.cluster.scenario = Some(scenario);
        self
    }

    /// nmo runs as its service account, in its namespace, with the RBAC manifests at `path`
    /// (e.g. deploy/base/rbac.yaml) enforced; the admin may still do anything.
    pub fn rbac(mut self, path: PathBuf) -> Self {
        self.cluster.rbac = Some(path);
        self
    }

    /// No kubelet and no controllers: objects keep the status they are given.
    pub fn static_cluster(mut self) -> Self {
        self.cluster.static_cluster = true;
        self
    }

    /// A namespace.
    pub fn namespace(mut self, name: &str) -> Self {
        self.seeds.push(Seed::Namespace(name.into()));
        self
    }

    /// A Running pod bound to `node`, labelled `app=<app>`, with no owner (nothing replaces it
    /// once evicted).
    pub fn pod(mut self, namespace: &str, name: &str, node: &str, app: &str) -> Self {
        self.seeds.push(Seed::Pod {
            namespace: namespace.into(),
            name: name.into(),
            node: node.into(),
            app: app.into(),
        });
        self
    }

    /// A PodDisruptionBudget over `app=<app>` with `minAvailable`.
    pub fn pdb(mut self, namespace: &str, name: &str, app: &str, min_available: i32) -> Self {
        self.seeds.push(Seed::Pdb {
            namespace: namespace.into(),
            name: name.into(),
            app: app.into(),
            min_available,
        });
        self
    }

    /// The node lease held by another medik8s operator, renewed `renewed_ago`.
    pub fn foreign_lease(mut self, node: &str, holder: &str, renewed_ago: Duration) -> Self {
        self.seeds.push(Seed::ForeignLease {
            node: node.into(),
            holder: holder.into(),
            renewed_ago,
        });
        self
    }

    /// A NodeMaintenance, there before nmo starts.
    pub fn maintenance(mut self, name: &str, node: &str) -> Self {
        self.seeds.push(Seed::Maintenance {
            name: name.into(),
            node: node.into(),
        });
        self
    }

    /// Any object, status included (written through the status subresource).
    pub fn object(mut self, object: Value) -> Self {
        self.seeds.push(Seed::Object(object));
        self
    }

    /// nmo's options (default: [`test_options`]).
    pub fn operator_options(mut self, options: OperatorOptions) -> Self {
        self.operator = Some(options);
        self
    }

    /// nmo does not start (the test may start it with [`TestEnv::start_operator`] after
    /// setting options, or drive nmo's parts itself).
    pub fn without_operator(mut self) -> Self {
        self.operator = None;
        self
    }

    /// nmo runs as a task of the test's runtime rather than on its own, so that a tracing
    /// subscriber the test sets for its thread sees nmo's spans.
    pub fn operator_on_test_runtime(mut self) -> Self {
        self.placement = Placement::TestRuntime;
        self
    }

    /// Starts the cluster, creates the seeds in order, then starts nmo (unless told not to).
    pub async fn start(self) -> TestEnv {
        let Started {
            backend,
            admin,
            operator,
            operator_kubeconfig,
            admin_kubeconfig,
        } = Backend::simulator(self.cluster).await;
        let start_operator = self.operator.is_some();
        let mut env = TestEnv {
            operator: None,
            admin: kube::Client::try_from(admin).expect("a client for the admin"),
            operator_config: operator,
            operator_kubeconfig,
            admin_kubeconfig,
            options: self.operator.unwrap_or_else(test_options),
            placement: self.placement,
            backend,
        };
        for seed in self.seeds {
            match seed {
                Seed::Namespace(name) => env.create_namespace(&name).await,
                Seed::Pod {
                    namespace,
                    name,
                    node,
                    app,
                } => env.create_pod(&namespace, &name, &node, &app).await,
                Seed::Pdb {
                    namespace,
                    name,
                    app,
                    min_available,
                } => env.create_pdb(&namespace, &name, &app, min_available).await,
                Seed::ForeignLease {
                    node,
                    holder,
                    renewed_ago,
                } => env.create_foreign_lease(&node, &holder, renewed_ago).await,
                Seed::Maintenance { name, node } => env.create_maintenance(&name, &node).await,
                Seed::Object(object) => env.create_object(object).await,
            }
        }
        if start_operator {
            env.start_operator();
        }
        env
    }
}

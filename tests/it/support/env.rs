//! [`TestEnv`]: a cluster, an admin client and nmo running against it, set up by a builder and
//! shut down on drop (the operator first, killed as a crash would, then the cluster).

use std::path::PathBuf;
use std::time::Duration;

use nmo::operator::{OperatorError, OperatorOptions};
use nmo_sim::{Scenario, SimHandle};
use serde_json::Value;

use super::backend::{Backend, Cluster, ClusterSpec, OPERATOR_USER, Started};
use super::names::Names;
use super::operator::{Operator, test_options};

/// A cluster with nmo running against it.
///
/// Tests read and change the cluster through the admin client only (the methods of `objects`
/// and `waits`), never through a backend's storage, so they run against a real API server
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
    /// The test's names as the cluster has them.
    pub(super) names: Names,
    /// Where nmo runs (its leader lease is there).
    operator_namespace: String,
    backend: Backend,
    // Last: the cluster goes after the operator and the clients.
    pub(super) cluster: Cluster,
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
    NodePatch {
        node: String,
        patch: Value,
    },
    Object(Value),
}

/// Sets up a [`TestEnv`]: the cluster, what is in it, and how nmo runs.
#[must_use = "nothing starts until `start().await`"]
pub struct TestEnvBuilder {
    backend: Backend,
    cluster: ClusterSpec,
    seeds: Vec<Seed>,
    operator: Option<OperatorOptions>,
    placement: Placement,
}

impl TestEnv {
    /// An empty simulated cluster with the NodeMaintenance CRD and nmo with [`test_options`].
    pub fn builder() -> TestEnvBuilder {
        TestEnv::on(Backend::Sim)
    }

    /// The same on `backend` (a test written for both gets it from `both_backends!`).
    pub fn on(backend: Backend) -> TestEnvBuilder {
        TestEnvBuilder {
            backend,
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

    /// nmo's client configuration (its identity and namespace), for a replica a test builds
    /// itself (with another namespace, say).
    pub fn operator_config(&self) -> kube::Config {
        self.operator_config.clone()
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
        match &self.cluster {
            Cluster::Sim(sim) => sim,
            Cluster::Real(_) => panic!(
                "env.sim() on the real backend: this test needs the simulator (fault injection or \
                 request accounting); run it on the simulator only"
            ),
        }
    }

    /// The backend this environment runs on.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// What nmo asked the API server so far, as (group, resource or `resource/subresource`,
    /// verb): from the simulator's accounting, or the real API server's audit log.
    pub fn operator_requests(&self) -> Vec<(String, String, String)> {
        match &self.cluster {
            Cluster::Sim(sim) => sim
                .accounting()
                .snapshot()
                .into_iter()
                .filter(|(key, _)| key.user == OPERATOR_USER)
                .map(|(key, _)| {
                    let resource = if key.subresource.is_empty() {
                        key.resource.clone()
                    } else {
                        format!("{}/{}", key.resource, key.subresource)
                    };
                    (key.group.clone(), resource, key.verb.clone())
                })
                .collect(),
            Cluster::Real(real) => real
                .operator_requests()
                .into_iter()
                .map(|r| (r.group.clone(), r.resource_path(), r.verb.clone()))
                .collect(),
        }
    }

    /// The request URIs of nmo's requests with `verb` on `resource` (`resource/subresource`),
    /// from the real API server's audit log; none on the simulator, whose accounting keeps no
    /// query strings.
    pub fn operator_request_uris(&self, verb: &str, resource: &str) -> Vec<String> {
        match &self.cluster {
            Cluster::Sim(_) => Vec::new(),
            Cluster::Real(real) => real
                .operator_requests()
                .into_iter()
                .filter(|r| r.verb == verb && r.resource_path() == resource)
                .map(|r| r.uri)
                .collect(),
        }
    }

    /// nmo's requests refused with 429 as `resource or resource/subresource` each, from the
    /// real API server's audit log (the simulator answers no flow-control 429).
    pub fn operator_throttled_requests(&self) -> Vec<String> {
        match &self.cluster {
            Cluster::Sim(_) => Vec::new(),
            Cluster::Real(real) => real
                .operator_requests()
                .into_iter()
                .filter(|r| r.code == 429)
                .map(|r| r.resource_path())
                .collect(),
        }
    }

    /// The requests of nmo that RBAC refused (403): the simulator's denials, or the real API
    /// server's audited 403s.
    pub fn operator_refusals(&self) -> Vec<String> {
        match &self.cluster {
            Cluster::Sim(sim) => sim.rbac_denials(),
            Cluster::Real(real) => real
                .operator_requests()
                .into_iter()
                .filter(|r| r.code == 403)
                .map(|r| format!("{} {}", r.verb, r.uri))
                .collect(),
        }
    }

    /// The cluster's name for the cluster-scoped name (node, NodeMaintenance) a test wrote:
    /// itself on the simulator, prefixed on the real backend (see `names`).
    pub fn name(&self, name: &str) -> String {
        self.names.name(name)
    }

    /// The cluster's name for a namespace a test wrote (shared namespaces such as `default`,
    /// `medik8s-leases` and `nmo-system` stay as they are).
    pub fn ns(&self, namespace: &str) -> String {
        self.names.namespace(namespace)
    }

    /// The namespace nmo runs in, where it elects its leader: `default`, or its own
    /// (`nmo-system`) when it runs as its service account (RBAC, and always on the real
    /// backend).
    pub fn operator_namespace(&self) -> &str {
        &self.operator_namespace
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

    /// `nodes` nodes (`node-0`, `node-1`, ...) with `pods` pods each, of ReplicaSets spread
    /// over them, and no PodDisruptionBudget: the usual cluster of a test
    /// (`Scenario::plain(nodes, pods).pdb(None)`).
    pub fn nodes(self, nodes: usize, pods: usize) -> Self {
        self.scenario(Scenario::plain(nodes, pods).pdb(None))
    }

    /// The same with a budget of `maxUnavailable: 1` over each ReplicaSet
    /// (`Scenario::plain(nodes, pods)`).
    pub fn budgeted_nodes(self, nodes: usize, pods: usize) -> Self {
        self.scenario(Scenario::plain(nodes, pods))
    }

    /// nmo runs as its service account, in its namespace, with the RBAC manifests at `path`
    /// (e.g. deploy/base/rbac.yaml) enforced; the admin may still do anything.
    pub fn rbac(mut self, path: PathBuf) -> Self {
        self.cluster.rbac = Some(path);
        self
    }

    /// [`Self::rbac`] with the RBAC nmo is deployed with (deploy/base/rbac.yaml).
    pub fn deployed_rbac(self) -> Self {
        self.rbac(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/base/rbac.yaml"))
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

    /// The namespace `namespace` with Running pods labelled `app=<app>` and no owner, each
    /// `(name, node)` bound to its node ([`Self::pod`]).
    pub fn namespace_with_pods(
        mut self,
        namespace: &str,
        app: &str,
        pods: &[(&str, &str)],
    ) -> Self {
        self = self.namespace(namespace);
        for (name, node) in pods {
            self = self.pod(namespace, name, node, app);
        }
        self
    }

    /// The tests' usual blocked pod: namespace `precious` with the pods `pods` on node-0,
    /// labelled `app=db`, under the budget `db-budget` of `min_available`.
    pub fn precious_pods(self, pods: &[&str], min_available: i32) -> Self {
        let on_node_0: Vec<(&str, &str)> = pods.iter().map(|pod| (*pod, "node-0")).collect();
        self.namespace_with_pods("precious", "db", &on_node_0).pdb(
            "precious",
            "db-budget",
            "db",
            min_available,
        )
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

    /// A JSON merge patch of a node, as another controller or an admin made it before nmo
    /// starts (see [`TestEnv::patch_node`]).
    pub fn patched_node(mut self, node: &str, patch: Value) -> Self {
        self.seeds.push(Seed::NodePatch {
            node: node.into(),
            patch,
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

    /// Starts the cluster and creates the seeds, without nmo (`without_operator().start()`):
    /// for a test that starts nmo itself or drives nmo's parts.
    pub async fn start_idle(self) -> TestEnv {
        self.without_operator().start().await
    }

    /// [`Self::start`], then creates the NodeMaintenance `name` of `node` as a test's first
    /// step (after nmo started, unlike [`Self::maintenance`]), and returns at once.
    pub async fn start_with_maintenance(self, name: &str, node: &str) -> TestEnv {
        let env = self.start().await;
        env.create_maintenance(name, node).await;
        env
    }

    /// [`Self::start`], then puts `node` into maintenance as a test's first step: creates the
    /// NodeMaintenance `name` and waits until it is Succeeded ([`TestEnv::maintain`]).
    pub async fn start_maintaining(self, name: &str, node: &str) -> TestEnv {
        let env = self.start().await;
        env.maintain(name, node).await;
        env
    }

    /// Starts the cluster, creates the seeds in order, then starts nmo (unless told not to).
    pub async fn start(self) -> TestEnv {
        let Started {
            cluster,
            admin,
            operator,
            operator_kubeconfig,
            admin_kubeconfig,
        } = self.backend.start(self.cluster).await;
        let names = match &cluster {
            Cluster::Real(real) => real.names().clone(),
            Cluster::Sim(_) => Names::identity(),
        };
        let operator_namespace = if operator.default_namespace.is_empty() {
            "default".to_string()
        } else {
            operator.default_namespace.clone()
        };
        let start_operator = self.operator.is_some();
        let mut env = TestEnv {
            operator: None,
            admin: kube::Client::try_from(admin).expect("a client for the admin"),
            operator_config: operator,
            operator_kubeconfig,
            admin_kubeconfig,
            options: self.operator.unwrap_or_else(test_options),
            placement: self.placement,
            names,
            operator_namespace,
            backend: self.backend,
            cluster,
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
                Seed::NodePatch { node, patch } => env.patch_node(&node, patch).await,
                Seed::Object(object) => env.create_object(object).await,
            }
        }
        if start_operator {
            env.start_operator();
        }
        env
    }
}

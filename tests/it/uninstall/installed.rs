//! The module's control plane (one per test binary, a test at a time) with `install.yaml` applied, one registered node, and nmo
//! running in-process as the install's ServiceAccount.

use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use nmo::crd::NodeMaintenance;
use nmo_envtest::{ControlPlane, Identity, Options};
use serde_json::{Value, json};
use tokio::sync::{Mutex, MutexGuard, oneshot};
use tokio::task::JoinHandle;

use crate::packaging::support::Kubectl;
use crate::support::eventually;

/// The namespace install.yaml runs nmo in.
pub const NMO_NAMESPACE: &str = "nmo-system";
/// The shared node lease namespace.
pub const LEASE_NAMESPACE: &str = "medik8s-leases";
/// How long the install's pod has between SIGTERM and its kill (install.yaml's
/// terminationGracePeriodSeconds).
pub const GRACE_PERIOD: Duration = Duration::from_secs(30);
/// The NodeMaintenance CRD.
pub const CRD: &str = "nodemaintenances.nodemaintenance.medik8s.io";
/// The install's uninstall command (install.yaml's header, the docs).
pub const DELETE_INSTALL: [&str; 7] = [
    "delete",
    "-f",
    "install.yaml",
    "-l",
    "app.kubernetes.io/name=nmo",
    "--wait=false",
    // The namespace's deletion may remove its objects before kubectl reaches them.
    "--ignore-not-found",
];

/// The module's control plane, started by the first test that needs it.
static PLANE: OnceLock<Result<ControlPlane, String>> = OnceLock::new();
/// One test at a time: each installs nmo and takes it away again.
static TURN: Mutex<()> = Mutex::const_new(());

fn plane() -> &'static ControlPlane {
    let started = PLANE.get_or_init(|| {
        // The namespace controller and the garbage collector; nothing needs the scheduler.
        let options = Options {
            scheduler: false,
            ..Options::default()
        };
        ControlPlane::start(options).map_err(|error| error.to_string())
    });
    match started {
        Ok(plane) => plane,
        Err(error) => panic!("the uninstall tests' control plane cannot start: {error}"),
    }
}

/// The cluster, as the admin sees it, with the module's turn.
pub struct Installed {
    pub plane: &'static ControlPlane,
    pub admin: kube::Client,
    _turn: MutexGuard<'static, ()>,
}

impl Installed {
    /// Takes the turn, clears what an earlier test left, applies `install.yaml`, waits for its
    /// CRD, and registers a Ready node `node`.
    pub async fn start(node: &str) -> Installed {
        let turn = TURN.lock().await;
        let plane = plane();
        let installed = Installed {
            admin: plane.admin_client().expect("an admin client"),
            plane,
            _turn: turn,
        };
        installed.clear().await;
        installed.kubectl_ok(&["apply", "-f", "install.yaml"]);
        Kubectl(installed.plane).established(&format!("crd/{CRD}"));
        installed
            .plane
            .register_node(node, &[])
            .await
            .expect("a node registers");
        installed
    }

    /// Removes what an earlier test left (the finalizers of its NodeMaintenances dropped by
    /// hand, as nothing will release them) and waits until nmo's namespace and CRD are gone.
    async fn clear(&self) {
        let maintenances: Api<NodeMaintenance> = Api::all(self.admin.clone());
        let left = maintenances.list(&Default::default()).await;
        for nm in left.map(|list| list.items).unwrap_or_default() {
            let name = nm.metadata.name.unwrap_or_default();
            let _ = self.kubectl(&[
                "patch",
                "nodemaintenance",
                &name,
                "--type=merge",
                "-p",
                r#"{"metadata":{"finalizers":null}}"#,
            ]);
        }
        let _ = self.kubectl(&DELETE_INSTALL);
        eventually(
            "an earlier test's install gone",
            Duration::from_secs(120),
            async || {
                let namespaces: Api<Namespace> = Api::all(self.admin.clone());
                let crds: Api<CustomResourceDefinition> = Api::all(self.admin.clone());
                let namespace = namespaces.get_opt(NMO_NAMESPACE).await.ok().flatten();
                let crd = crds.get_opt(CRD).await.ok().flatten();
                namespace.is_none() && crd.is_none()
            },
        )
        .await;
    }

    /// Runs kubectl as the admin from the repository.
    pub fn kubectl(&self, args: &[&str]) -> std::process::Output {
        Kubectl(self.plane).run(args)
    }

    /// Runs kubectl as the admin from the repository; fails the test with its words.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        Kubectl(self.plane).ok(args)
    }

    /// A client for nmo's ServiceAccount with a bound token (`kubectl create token`), as its
    /// pod has: the API server refuses it once the ServiceAccount is gone.
    pub fn nmo_client(&self) -> kube::Client {
        let token = self.kubectl_ok(&[
            "create",
            "token",
            "nmo",
            "-n",
            NMO_NAMESPACE,
            "--duration=1h",
        ]);
        let mut config = self
            .plane
            .client_config(&Identity::admin())
            .expect("a client configuration");
        config.auth_info = kube::config::AuthInfo {
            token: Some(token.trim().to_string().into()),
            ..kube::config::AuthInfo::default()
        };
        config.default_namespace = NMO_NAMESPACE.into();
        nmo::operator::client(config, &nmo::operator::OperatorOptions::default())
            .expect("nmo's client")
            .client
    }

    /// Starts nmo in-process as the install's Deployment runs it (leader election in its
    /// namespace), without its webhook server (nothing here routes to a Service).
    pub fn start_nmo(&self, options: nmo::operator::OperatorOptions) -> Nmo {
        let (terminate, terminated) = oneshot::channel::<()>();
        let task = tokio::spawn(nmo::operator::run(self.nmo_client(), options, async move {
            let _ = terminated.await;
        }));
        Nmo {
            terminate: Some(terminate),
            task,
        }
    }

    /// Creates a NodeMaintenance for `node` as the admin.
    pub async fn create_maintenance(&self, name: &str, node: &str) {
        let maintenances: Api<NodeMaintenance> = Api::all(self.admin.clone());
        let maintenance: NodeMaintenance = serde_json::from_value(json!({
            "apiVersion": "nodemaintenance.medik8s.io/v1beta1",
            "kind": "NodeMaintenance",
            "metadata": {"name": name},
            "spec": {"nodeName": node, "reason": "uninstall test"},
        }))
        .expect("a NodeMaintenance");
        maintenances
            .create(&PostParams::default(), &maintenance)
            .await
            .expect("created");
    }

    /// The node as stored.
    pub async fn node(&self, name: &str) -> Value {
        let nodes: Api<Node> = Api::all(self.admin.clone());
        serde_json::to_value(nodes.get(name).await.expect("the node")).expect("JSON")
    }

    /// The holder of the node's lease, if there is one.
    pub async fn lease_holder(&self, node: &str) -> Option<String> {
        let leases: Api<Lease> = Api::namespaced(self.admin.clone(), LEASE_NAMESPACE);
        leases
            .get_opt(&format!("node-{node}"))
            .await
            .ok()
            .flatten()
            .and_then(|lease| lease.spec)
            .and_then(|spec| spec.holder_identity)
    }

    /// Waits until nmo has `node` in maintenance: cordoned, labelled, its lease held.
    pub async fn wait_in_maintenance(&self, node: &str) {
        eventually(
            &format!("{node} in maintenance"),
            Duration::from_secs(60),
            async || {
                let seen = self.node(node).await;
                let cordoned = seen["spec"]["unschedulable"] == true;
                let labelled =
                    seen["metadata"]["labels"][nmo_actors::model::EXCLUDE_LABEL] == "true";
                let leased = self.lease_holder(node).await.as_deref() == Some("node-maintenance");
                if cordoned && labelled && leased {
                    Ok(())
                } else {
                    Err(format!(
                        "cordoned {cordoned}, labelled {labelled}, leased {leased}"
                    ))
                }
            },
        )
        .await;
    }

    /// What of `node`'s maintenance is still there: empty once it is given back.
    pub async fn left_on_node(&self, node: &str) -> Vec<String> {
        let seen = self.node(node).await;
        let mut left = Vec::new();
        if seen["spec"]["unschedulable"] == true {
            left.push("cordoned".to_string());
        }
        if !seen["metadata"]["labels"][nmo_actors::model::EXCLUDE_LABEL].is_null() {
            left.push("labelled".to_string());
        }
        for taint in seen["spec"]["taints"].as_array().into_iter().flatten() {
            let key = taint["key"].as_str().unwrap_or_default();
            if key == nmo_actors::model::DRAIN_TAINT_KEY
                || key == nmo_actors::model::UNSCHEDULABLE_TAINT_KEY
            {
                left.push(format!("tainted {key}"));
            }
        }
        if self.lease_holder(node).await.as_deref() == Some("node-maintenance") {
            left.push("leased by node-maintenance".to_string());
        }
        left
    }
}

/// nmo running in-process, as a pod would: told to stop (SIGTERM), killed after the grace
/// period if it has not stopped by then.
pub struct Nmo {
    terminate: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), nmo::operator::OperatorError>>,
}

impl Nmo {
    /// SIGTERM, then the kill `grace` later: nmo's outcome, None when it had to be killed.
    pub async fn terminate(mut self, grace: Duration) -> Option<Result<(), String>> {
        if let Some(terminate) = self.terminate.take() {
            let _ = terminate.send(());
        }
        match tokio::time::timeout(grace, &mut self.task).await {
            Ok(outcome) => Some(
                outcome
                    .map_err(|join| join.to_string())
                    .and_then(|run| run.map_err(|error| error.to_string())),
            ),
            Err(_) => {
                self.task.abort();
                None
            }
        }
    }

    /// Whether nmo stopped on its own.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

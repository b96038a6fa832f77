//! The real backend: etcd, kube-apiserver, kube-controller-manager and kube-scheduler from
//! `KUBEBUILDER_ASSETS` (nmo-envtest), one control plane for the whole test binary, and a
//! kubelet stand-in (nmo-sim's `kubelet::remote`, the simulator's own kubelet rules) for the
//! nodes of the test that runs.
//!
//! - Set up once per binary: deploy/base's CRD installed, deploy/base's RBAC applied, so nmo's
//!   ServiceAccount `nmo-system/nmo` has exactly those rights under the real RBAC authorizer.
//!   nmo always runs as that ServiceAccount here, in its namespace `nmo-system`.
//! - One test at a time: nmo watches every NodeMaintenance in the cluster, counts cordoned
//!   nodes and watches PDBs cluster wide, so two operators of two tests would act on each
//!   other's objects. A test takes the binary's turn when it starts its environment and gives
//!   it back when the environment is dropped (the simulator's tests meanwhile run in parallel).
//! - Names: the test's nodes, NodeMaintenances and namespaces get a prefix unique to it
//!   ([`Names`]), so nothing a previous test left (a namespace still terminating, say)
//!   collides with it.
//! - Clean-up: when a test takes its turn, what earlier tests left is swept away (their
//!   NodeMaintenances with their finalizers, nodes, namespaces with their pods, node leases,
//!   nmo's own workload in `nmo-system`, the leader lease), so a test that failed midway
//!   harms no other.
//! - Processes: the control plane is stopped when the binary ends, however it ends (panic,
//!   kill -9): nmo-envtest's wrappers kill each component when the test process goes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use nmo::crd::NodeMaintenance;
use nmo_envtest::audit::Request;
use nmo_envtest::{AuditLog, ControlPlane, Identity, NodeTemplate, Options, yaml_files_in};
use nmo_sim::Timing;
use nmo_sim::kubelet::remote::{self, NodeSet};
use serde_json::json;
use tokio::sync::{Mutex, MutexGuard, OnceCell, oneshot};

use super::backend::{ADMIN_AGENT, ClusterSpec, OPERATOR_AGENT, OPERATOR_NAMESPACE, OPERATOR_USER};
use super::names::Names;

/// The label on every node a real-backend test registers: its prefix without the dash.
pub const TEST_LABEL: &str = "nmo-test/env";
/// nmo's ServiceAccount (deploy/base/serviceaccount.yaml), the subject of deploy/base's RBAC.
const OPERATOR_ACCOUNT: &str = "nmo";
/// How long a scenario may take to settle (pods running, owners and PDBs up to date).
const SETTLE: Duration = Duration::from_secs(60);
/// The deadline of one clean-up call.
const CALL_DEADLINE: Duration = Duration::from_secs(15);

/// The binary's turn: one real-backend test at a time.
static TURN: Mutex<()> = Mutex::const_new(());
/// The CRD and RBAC, installed once.
static SETUP: OnceCell<Result<(), String>> = OnceCell::const_new();
/// Numbers the tests' prefixes.
static NEXT_TEST: AtomicU64 = AtomicU64::new(1);

/// deploy/base: the manifests the real backend installs.
fn deploy_base() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/base")
}

/// The audit log of nmo's requests (its ServiceAccount's user), for the binary's control plane.
static AUDIT: std::sync::OnceLock<Result<AuditLog, String>> = std::sync::OnceLock::new();

/// Where the binary's audit log goes: a directory of this process, removed by the next run
/// once this process is gone (a static is never dropped).
fn audit() -> Result<&'static AuditLog, String> {
    AUDIT
        .get_or_init(|| {
            let base = std::env::temp_dir();
            if let Ok(entries) = std::fs::read_dir(&base) {
                for entry in entries.flatten() {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    let stale = name
                        .strip_prefix("nmo-it-audit-")
                        .and_then(|pid| pid.parse::<u32>().ok())
                        .is_some_and(|pid| !nmo_envtest::is_alive(pid));
                    if stale {
                        let _ = std::fs::remove_dir_all(entry.path());
                    }
                }
            }
            let dir = base.join(format!("nmo-it-audit-{}", std::process::id()));
            std::fs::create_dir_all(&dir)
                .map_err(|error| format!("creating {}: {error}", dir.display()))?;
            AuditLog::for_users(&dir, &[OPERATOR_USER]).map_err(|error| error.to_string())
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The binary's control plane, or the reason it cannot run (missing binaries say which and
/// how to get them). Its API server audits nmo's requests.
pub fn control_plane() -> Result<&'static ControlPlane, String> {
    let audit = audit()?;
    control_plane_with(&Options {
        extra_args: audit.apiserver_args(),
        ..Options::default()
    })
}

/// The binary's control plane, started with `options` by the first caller.
pub fn control_plane_with(options: &Options) -> Result<&'static ControlPlane, String> {
    ControlPlane::shared_with(options).map_err(cannot_start)
}

/// What a test that cannot have its real backend fails with.
fn cannot_start(error: impl std::fmt::Display) -> String {
    format!("the real API server backend cannot start: {error}")
}

/// Installs the CRD and applies the RBAC of deploy/base, once per binary.
async fn set_up(control_plane: &'static ControlPlane) -> Result<(), String> {
    SETUP
        .get_or_init(|| async move {
            let files = yaml_files_in(&deploy_base()).map_err(|e| e.to_string())?;
            control_plane
                .install_crds(&files)
                .await
                .map_err(|e| format!("installing deploy/base's CRD: {e}"))?;
            control_plane
                .apply_rbac(&files)
                .await
                .map_err(|e| format!("applying deploy/base's RBAC: {e}"))?;
            Ok(())
        })
        .await
        .clone()
}

/// A test's share of the real control plane; gives the turn back when dropped.
pub struct RealCluster {
    names: Names,
    /// Where the audit log stood when the test began (or last forgot nmo's requests).
    audit_mark: AtomicU64,
    /// Stopped when the test's share is dropped.
    _kubelet: KubeletThread,
    // Last: the turn goes back once the kubelet has stopped.
    _turn: MutexGuard<'static, ()>,
}

/// What starting a test's share gives.
pub struct RealStart {
    pub cluster: RealCluster,
    pub admin: kube::Config,
    pub operator: kube::Config,
    pub operator_kubeconfig: String,
    pub admin_kubeconfig: String,
}

impl RealCluster {
    /// Takes the binary's turn, sweeps what earlier tests left, registers the scenario's nodes,
    /// starts the kubelet stand-in for them and seeds the scenario. Panics with the reason when
    /// the control plane cannot run.
    pub async fn start(spec: ClusterSpec) -> RealStart {
        let control_plane = control_plane().unwrap_or_else(|error| panic!("{error}"));
        set_up(control_plane)
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        let turn = TURN.lock().await;
        let audit_mark = audit().map(AuditLog::mark).unwrap_or(0);
        let admin_config = config_as(control_plane, &Identity::admin(), ADMIN_AGENT, "default");
        let admin = kube::Client::try_from(admin_config.clone()).expect("an admin client");
        sweep(control_plane, &admin).await;

        let id = format!("t{}", NEXT_TEST.fetch_add(1, Ordering::Relaxed));
        let names = Names::prefixed(&format!("{id}-"));
        let mut nodes = Vec::new();
        if let Some(scenario) = &spec.scenario {
            for node in scenario.node_names() {
                let name = names.name(&node);
                control_plane
                    .register(NodeTemplate::new(&name).label(TEST_LABEL, &id))
                    .await
                    .unwrap_or_else(|error| panic!("registering node {name}: {error}"));
                nodes.push(name);
            }
        }
        let timing = Timing {
            time_scale: 0.0,
            ..Timing::default()
        };
        // A static cluster keeps pods as they are given: no kubelet. (The controllers of a
        // real control plane run regardless.)
        let served = if spec.static_cluster {
            NodeSet::only(Vec::<String>::new())
        } else {
            NodeSet::only(nodes.clone())
        };
        let kubelet = KubeletThread::start(admin_config.clone(), timing, served);
        if let Some(scenario) = &spec.scenario {
            let mut scenario = scenario.clone();
            scenario.node_prefix = names.name(&scenario.node_prefix);
            scenario.workload_namespace = names.namespace(&scenario.workload_namespace);
            scenario.system_namespace = names.namespace(&scenario.system_namespace);
            scenario.node_labels.insert(TEST_LABEL.into(), id.clone());
            nmo_sim::api_seed::seed(&admin, &scenario, SETTLE)
                .await
                .unwrap_or_else(|error| panic!("seeding the scenario: {error}"));
        }

        let nmo = Identity::service_account(OPERATOR_NAMESPACE, OPERATOR_ACCOUNT);
        let mut operator = config_as(control_plane, &nmo, OPERATOR_AGENT, OPERATOR_NAMESPACE);
        // As nmo builds its client (`nmo::operator::client`): kube's own retries off.
        operator.default_retry = false;
        let operator_kubeconfig = kubeconfig_text(control_plane, &nmo, OPERATOR_NAMESPACE);
        let admin_kubeconfig = kubeconfig_text(control_plane, &Identity::admin(), "default");
        RealStart {
            cluster: RealCluster {
                names,
                audit_mark: AtomicU64::new(audit_mark),
                _kubelet: kubelet,
                _turn: turn,
            },
            admin: admin_config,
            operator,
            operator_kubeconfig,
            admin_kubeconfig,
        }
    }

    /// How the test's names map to the cluster's.
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// nmo's requests since the test began, from the API server's audit log (tests take
    /// turns, so they are this test's).
    pub fn operator_requests(&self) -> Vec<Request> {
        audit()
            .and_then(|audit| {
                audit
                    .requests_since(self.audit_mark.load(Ordering::Relaxed))
                    .map_err(|error| error.to_string())
            })
            .unwrap_or_else(|error| panic!("reading the audit log: {error}"))
    }

    /// Forgets nmo's requests so far: [`RealCluster::operator_requests`] reads only what
    /// follows.
    pub fn forget_operator_requests(&self) {
        if let Ok(audit) = audit() {
            self.audit_mark.store(audit.mark(), Ordering::Relaxed);
        }
    }
}

/// A client configuration for `identity`, with a User-Agent and a default namespace.
fn config_as(
    control_plane: &ControlPlane,
    identity: &Identity,
    agent: &str,
    namespace: &str,
) -> kube::Config {
    let mut config = control_plane
        .client_config(identity)
        .unwrap_or_else(|error| panic!("a client configuration for {identity:?}: {error}"));
    config.default_namespace = namespace.into();
    if let Ok(agent) = http::HeaderValue::from_str(agent) {
        config.headers.push((http::header::USER_AGENT, agent));
    }
    config
}

/// The kubeconfig of `identity` as text, with `namespace` as its context's namespace.
fn kubeconfig_text(control_plane: &ControlPlane, identity: &Identity, namespace: &str) -> String {
    let path = control_plane
        .kubeconfig_path(identity)
        .unwrap_or_else(|error| panic!("a kubeconfig for {identity:?}: {error}"));
    let text = std::fs::read_to_string(&path).expect("the kubeconfig is readable");
    let mut document: serde_yaml::Value = serde_yaml::from_str(&text).expect("kubeconfig YAML");
    document["contexts"][0]["context"]["namespace"] = namespace.into();
    serde_yaml::to_string(&document).expect("kubeconfig YAML")
}

/// Whether `name` is one a real-backend test gave (`t<n>-...`).
fn is_test_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('t') else {
        return false;
    };
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    digits > 0 && rest[digits..].starts_with('-')
}

/// Runs a clean-up call with a deadline; a failure is logged (the next sweep tries again).
async fn best_effort<T>(what: String, call: impl Future<Output = Result<T, kube::Error>>) {
    match tokio::time::timeout(CALL_DEADLINE, call).await {
        Ok(Ok(_)) | Ok(Err(kube::Error::Api(_))) => {}
        Ok(Err(error)) => eprintln!("real backend clean-up: {what}: {error}"),
        Err(_) => eprintln!("real backend clean-up: {what}: no answer in time"),
    }
}

/// Removes what earlier tests left: their NodeMaintenances (finalizers dropped: no operator
/// will undo them), namespaces (their pods deleted at once, as no kubelet finishes them),
/// nodes, node leases, nmo's workload in its namespace, and nmo's leader lease.
async fn sweep(control_plane: &ControlPlane, admin: &kube::Client) {
    // First: a test's eviction webhook left registered would see every later eviction.
    let webhooks: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
    best_effort(
        "deleting the tests' eviction webhooks".to_string(),
        webhooks.delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels(nmo_sim::emulation::webhook::LABEL),
        ),
    )
    .await;
    let maintenances: Api<NodeMaintenance> = Api::all(admin.clone());
    if let Ok(list) = maintenances.list(&ListParams::default()).await {
        for nm in list.items {
            let name = nm.metadata.name.clone().unwrap_or_default();
            if !is_test_name(&name) {
                continue;
            }
            best_effort(
                format!("deleting NodeMaintenance {name}"),
                maintenances.delete(&name, &DeleteParams::default()),
            )
            .await;
            let patch = json!({"metadata": {"finalizers": null}});
            best_effort(
                format!("dropping the finalizers of {name}"),
                maintenances.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)),
            )
            .await;
        }
    }
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    if let Ok(list) = namespaces.list(&ListParams::default()).await {
        for namespace in list.items {
            let name = namespace.metadata.name.clone().unwrap_or_default();
            if !is_test_name(&name) {
                continue;
            }
            if namespace.metadata.deletion_timestamp.is_none() {
                best_effort(
                    format!("deleting namespace {name}"),
                    namespaces.delete(&name, &DeleteParams::default()),
                )
                .await;
            }
            let pods: Api<Pod> = Api::namespaced(admin.clone(), &name);
            best_effort(
                format!("deleting the pods of {name}"),
                pods.delete_collection(
                    &DeleteParams {
                        grace_period_seconds: Some(0),
                        ..DeleteParams::default()
                    },
                    &ListParams::default(),
                ),
            )
            .await;
        }
    }
    // Registered nodes carry the test label; nodes a test created as objects (the webhook's)
    // only a test's name.
    let nodes: Api<Node> = Api::all(admin.clone());
    if let Ok(list) = nodes.list(&ListParams::default()).await {
        for node in list.items {
            let name = node.metadata.name.clone().unwrap_or_default();
            let labelled = node
                .metadata
                .labels
                .as_ref()
                .is_some_and(|labels| labels.contains_key(TEST_LABEL));
            if !labelled && !is_test_name(&name) {
                continue;
            }
            control_plane.stop_heartbeat(&name);
            best_effort(
                format!("deleting node {name}"),
                nodes.delete(&name, &DeleteParams::default()),
            )
            .await;
        }
    }
    let leases: Api<Lease> = Api::namespaced(admin.clone(), "medik8s-leases");
    if let Ok(list) = leases.list(&ListParams::default()).await {
        for lease in list.items {
            let name = lease.metadata.name.clone().unwrap_or_default();
            if name.strip_prefix("node-").is_some_and(is_test_name) {
                best_effort(
                    format!("deleting lease {name}"),
                    leases.delete(&name, &DeleteParams::default()),
                )
                .await;
            }
        }
    }
    sweep_operator_workload(admin).await;
    for namespace in [OPERATOR_NAMESPACE, "default"] {
        let leases: Api<Lease> = Api::namespaced(admin.clone(), namespace);
        best_effort(
            format!("deleting the leader lease in {namespace}"),
            leases.delete(nmo::leader::LEADER_ELECTION_ID, &DeleteParams::default()),
        )
        .await;
    }
}

/// Removes nmo's own workload from its shared namespace, as a test that installs nmo's
/// Deployment leaves it (self_placement: its ReplicaSet, its pods, its PDB): nothing else
/// runs there on the real backend, where nmo runs in-process.
async fn sweep_operator_workload(admin: &kube::Client) {
    let everything = ListParams::default();
    let replicasets: Api<ReplicaSet> = Api::namespaced(admin.clone(), OPERATOR_NAMESPACE);
    best_effort(
        format!("deleting the ReplicaSets of {OPERATOR_NAMESPACE}"),
        replicasets.delete_collection(&DeleteParams::default(), &everything),
    )
    .await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(admin.clone(), OPERATOR_NAMESPACE);
    best_effort(
        format!("deleting the PodDisruptionBudgets of {OPERATOR_NAMESPACE}"),
        pdbs.delete_collection(&DeleteParams::default(), &everything),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), OPERATOR_NAMESPACE);
    best_effort(
        format!("deleting the pods of {OPERATOR_NAMESPACE}"),
        pods.delete_collection(
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            },
            &everything,
        ),
    )
    .await;
}

/// The kubelet stand-in on a thread and runtime of its own (the test's runtime may be busy
/// or blocked; a kubelet is a process of its own too). Stopped when dropped.
struct KubeletThread {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl KubeletThread {
    fn start(admin: kube::Config, timing: Timing, nodes: NodeSet) -> KubeletThread {
        let (stop, stopped) = oneshot::channel::<()>();
        let served = nodes;
        let thread = std::thread::Builder::new()
            .name("kubelet-stand-in".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime for the kubelet stand-in");
                runtime.block_on(async move {
                    let client = kube::Client::try_from(admin).expect("a client for the kubelet");
                    remote::run(client, timing, served, async move {
                        let _ = stopped.await;
                    })
                    .await;
                });
                runtime.shutdown_background();
            })
            .expect("the kubelet stand-in's thread starts");
        KubeletThread {
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for KubeletThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test on the real backend without the binaries fails at once, saying which binary is
    /// missing and how to get them (the path `control_plane` takes, with a control plane of
    /// its own so as to leave the binary's shared one alone).
    #[test]
    fn missing_binaries_fail_the_test_with_what_is_missing_and_how_to_get_it() {
        let empty = tempfile::tempdir().expect("a directory");
        let started = std::time::Instant::now();
        let error = ControlPlane::start(Options {
            assets: Some(empty.path().to_path_buf()),
            ..Options::default()
        })
        .map(|_| ())
        .map_err(cannot_start)
        .expect_err("no binaries, no control plane");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "no hang"
        );
        assert!(
            error.starts_with("the real API server backend cannot start"),
            "{error}"
        );
        assert!(
            error.contains("etcd") && error.contains("missing"),
            "{error}"
        );
        assert!(error.contains("KUBEBUILDER_ASSETS"), "{error}");
        assert!(error.contains("assets"), "how to get them: {error}");
    }

    #[test]
    fn test_names_are_told_from_others() {
        assert!(is_test_name("t12-node-0"));
        assert!(is_test_name("t1-x"));
        assert!(!is_test_name("t-node"));
        assert!(!is_test_name("tx1-node"));
        assert!(!is_test_name("node-0"));
        assert!(!is_test_name("t12"));
    }
}

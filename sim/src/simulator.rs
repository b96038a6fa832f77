//! Starting and stopping a simulator, and what a test may ask a running one: a kube client,
//! a kubeconfig, the stored objects, the request counters, fault injection.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::task::JoinHandle;

use crate::accounting::{Accounting, Query};
use crate::errors::{ApiError, SimError};
use crate::faults::{FaultRule, Faults};
use crate::kubelet::{self, Timing};
use crate::object::StoredObject;
use crate::rbac::Rbac;
use crate::rest::Api;
use crate::scenario::{self, Scenario, ScenarioReport};
use crate::store::Store;
use crate::{kubeconfig, lifecycle, pdb, resources, router, scheduler, selectors, workloads};

/// Configuration of a simulator.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Port on 127.0.0.1 (0: ephemeral).
    pub port: u16,
    /// CRDs installed at start (objects as JSON, e.g. `serde_json::to_value(&crd)`).
    pub crds: Vec<Value>,
    /// A scenario seeded before the controllers start.
    pub scenario: Option<Scenario>,
    /// Speed of the simulated cluster.
    pub timing: Timing,
    /// Watch events kept per resource (older resourceVersions get 410 Expired).
    pub history_limit: usize,
    /// Interval between watch bookmarks.
    pub bookmark_interval: Duration,
    /// Bearer token -> user name. When non-empty, unknown tokens get 401.
    pub tokens: HashMap<String, String>,
    /// RBAC enforced for one user.
    pub rbac: Option<Rbac>,
    /// Run the in-process controllers (kubelet, scheduler, ReplicaSet, PDB, namespace, GC).
    pub controllers: bool,
    /// With the controllers, run the in-process kubelet too (off: pods keep the phase they are
    /// given, as on an API server without kubelets; another kubelet, such as
    /// [`crate::kubelet::remote`], may play it).
    pub kubelet: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            port: 0,
            crds: Vec::new(),
            scenario: None,
            timing: Timing::default(),
            history_limit: 5_000,
            bookmark_interval: Duration::from_secs(10),
            tokens: HashMap::new(),
            rbac: None,
            controllers: true,
            kubelet: true,
        }
    }
}

impl SimConfig {
    /// Adds a CRD (any serializable CustomResourceDefinition, e.g. from `kube::CustomResourceExt`).
    pub fn crd<T: serde::Serialize>(mut self, crd: &T) -> Result<Self, SimError> {
        self.crds.push(serde_json::to_value(crd)?);
        Ok(self)
    }
    /// Adds a CRD given as JSON.
    #[must_use]
    pub fn crd_json(mut self, crd: Value) -> Self {
        self.crds.push(crd);
        self
    }
    /// Seeds a scenario.
    #[must_use]
    pub fn scenario(mut self, s: Scenario) -> Self {
        self.scenario = Some(s);
        self
    }
    /// Sets the time scale (1.0 real time, 0 instant).
    #[must_use]
    pub fn time_scale(mut self, f: f64) -> Self {
        self.timing.time_scale = f;
        self
    }
    /// Maps a bearer token to a user.
    #[must_use]
    pub fn token(mut self, token: &str, user: &str) -> Self {
        self.tokens.insert(token.into(), user.into());
        self
    }
}

/// How a kube client built by the simulator identifies itself.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// User-Agent header.
    pub user_agent: String,
    /// Bearer token.
    pub token: Option<String>,
    /// kube's default retry of 429/503/504 (off by default so tests see every response).
    pub retry: bool,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            user_agent: "nmo-sim-client".into(),
            token: None,
            retry: false,
        }
    }
}

/// Starts simulators.
pub struct Simulator;

impl Simulator {
    /// Starts a simulator: installs CRDs, seeds the scenario, starts the controllers and serves.
    pub async fn start(config: SimConfig) -> Result<SimHandle, SimError> {
        let store = Store::new(config.history_limit);
        let registry = Arc::new(resources::Registry::new());
        let api = Arc::new(Api { registry, store });
        create_system_namespaces(&api)?;
        install_crds(&api, &config.crds)?;
        let report = match &config.scenario {
            Some(s) => Some(scenario::apply(&api, s)?),
            None => None,
        };
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", config.port)).await?;
        let addr = listener.local_addr()?;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let shared = Arc::new(router::Shared {
            api: api.clone(),
            accounting: Arc::new(Accounting::default()),
            faults: Arc::new(Faults::default()),
            rbac: config.rbac.clone().map(Arc::new),
            tokens: config.tokens.clone(),
            addr: addr.to_string(),
            bookmark_interval: config.bookmark_interval,
            shutdown: stop_rx.clone(),
            audit: Arc::new(crate::audit::Audit::default()),
        });
        let mut controllers = None;
        if config.controllers {
            // The disruption controller first, so PDBs get their status before anyone evicts.
            sync_budgets(&api)?;
            controllers = Some(start_controllers(&api, &config, &stop_rx)?);
        }
        let app = router::router(shared.clone());
        let connections = Arc::new(crate::server::Connections::default());
        let server = tokio::spawn(crate::server::serve(
            listener,
            app,
            stop_rx.clone(),
            connections.clone(),
        ));
        Ok(SimHandle {
            shared,
            connections,
            addr,
            stop: stop_tx,
            server: Some(server),
            controllers,
            report,
        })
    }
}

/// The namespaces every cluster has.
fn create_system_namespaces(api: &Api) -> Result<(), SimError> {
    let nsdef = api.def(resources::names::NAMESPACES)?;
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        api.create(
            &nsdef,
            "",
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            false,
            false,
        )?;
    }
    Ok(())
}

/// Creates the CRDs, without what another server gave them (resourceVersion, uid,
/// creationTimestamp, status).
fn install_crds(api: &Api, crds: &[Value]) -> Result<(), SimError> {
    let crddef = api.def(resources::names::CRDS)?;
    for crd in crds {
        let mut c = crd.clone();
        if let Some(m) = c.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            m.remove("resourceVersion");
            m.remove("uid");
            m.remove("creationTimestamp");
        }
        if let Some(m) = c.as_object_mut() {
            m.remove("status");
        }
        api.create(&crddef, "", c, false, false)?;
    }
    Ok(())
}

/// The status of every seeded PDB.
fn sync_budgets(api: &Api) -> Result<(), SimError> {
    if let Ok(pdbs) = api.def(resources::names::PDBS) {
        let namespaces: std::collections::HashSet<String> = api
            .store
            .list(&pdbs, &selectors::Filter::default(), None, 0)
            .0
            .iter()
            .map(|p| p.namespace.clone())
            .collect();
        for ns in namespaces {
            pdb::sync_namespace(api, &ns)?;
        }
    }
    Ok(())
}

/// Starts the controllers (the kubelet's too, if configured).
fn start_controllers(
    api: &Arc<Api>,
    config: &SimConfig,
    stop_rx: &tokio::sync::watch::Receiver<bool>,
) -> Result<std::thread::JoinHandle<()>, SimError> {
    // The controllers run on their own thread and runtime: their bursts of work (a
    // resync over 60,000 pods) must never starve the HTTP handlers.
    let (api2, stop2, timing) = (api.clone(), stop_rx.clone(), config.timing);
    let with_kubelet = config.kubelet;
    let thread = std::thread::Builder::new()
        .name("sim-controllers".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!(error = %e, "simulator controllers could not start");
                    return;
                }
            };
            rt.block_on(async move {
                let _ = tokio::join!(
                    pdb::run(api2.clone(), stop2.clone()),
                    async {
                        if with_kubelet {
                            kubelet::run(api2.clone(), timing, stop2.clone()).await;
                        }
                    },
                    scheduler::run(api2.clone(), stop2.clone()),
                    workloads::run(api2.clone(), stop2.clone()),
                    lifecycle::run(api2.clone(), stop2.clone()),
                );
            });
        })?;
    Ok(thread)
}

/// A running simulator.
pub struct SimHandle {
    shared: Arc<router::Shared>,
    connections: Arc<crate::server::Connections>,
    addr: SocketAddr,
    stop: tokio::sync::watch::Sender<bool>,
    server: Option<JoinHandle<()>>,
    controllers: Option<std::thread::JoinHandle<()>>,
    report: Option<ScenarioReport>,
}

impl SimHandle {
    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kube client (User-Agent `nmo-sim-client`, no token, no automatic retries).
    pub fn kube_client(&self) -> Result<kube::Client, SimError> {
        self.kube_client_with(&ClientOptions::default())
    }

    /// A kube client with a given identity.
    pub fn kube_client_with(&self, opts: &ClientOptions) -> Result<kube::Client, SimError> {
        Ok(kube::Client::try_from(self.kube_config_with(opts)?)?)
    }

    /// The configuration of a kube client with a given identity: for a client built later, or
    /// on another runtime (a client's connection pool lives on the runtime that builds it).
    pub fn kube_config_with(&self, opts: &ClientOptions) -> Result<kube::Config, SimError> {
        let uri: http::Uri = self
            .base_url()
            .parse()
            .map_err(|e: http::uri::InvalidUri| SimError::Config(e.to_string()))?;
        let mut cfg = kube::Config::new(uri);
        cfg.default_namespace = "default".into();
        cfg.default_retry = opts.retry;
        if let Ok(ua) = http::HeaderValue::from_str(&opts.user_agent) {
            cfg.headers.push((http::header::USER_AGENT, ua));
        }
        if let Some(t) = &opts.token {
            cfg.auth_info.token = Some(t.clone().into());
        }
        Ok(cfg)
    }

    /// Writes a kubeconfig for kubectl (and `Config::infer`).
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), SimError> {
        kubeconfig::write(path, &self.base_url(), None)
    }

    /// Writes a kubeconfig carrying a bearer token.
    pub fn write_kubeconfig_with_token(&self, path: &Path, token: &str) -> Result<(), SimError> {
        kubeconfig::write(path, &self.base_url(), Some(token))
    }

    /// The REST layer (direct store access with the API's semantics).
    pub fn api(&self) -> &Arc<Api> {
        &self.shared.api
    }

    /// The raw store.
    pub fn store(&self) -> &Arc<Store> {
        &self.shared.api.store
    }

    /// Closes every open connection at once (see [`crate::server::Connections::drop_all`]);
    /// returns how many.
    pub fn drop_connections(&self) -> usize {
        self.connections.drop_all()
    }

    /// What a kube-apiserver restart does to its clients while the cluster lives on (etcd and
    /// the controllers keep running): every connection is dropped, every request is answered
    /// 503 for `down_for`, and once the server is back every watch resumed from before the
    /// restart ends with 410 Expired (its fresh watch cache does not reach back), so that each
    /// client has to list again. Returns when the server is back, with the connections it
    /// dropped.
    pub async fn restart_api_server(&self, down_for: Duration) -> usize {
        let unavailable = self.faults().add(FaultRule::unavailable());
        let dropped = self.drop_connections();
        tokio::time::sleep(down_for).await;
        self.store().expire_watch_history();
        self.faults().remove(unavailable);
        dropped
    }

    /// Calls `hook` for every request about to be served from now on (None: no more); see
    /// [`crate::audit`].
    pub fn set_audit_hook(&self, hook: Option<crate::audit::AuditHook>) {
        self.shared.audit.set(hook);
    }

    /// Sets (or removes) the hook called after each request that reached the REST layer was
    /// served, with the status it was answered with.
    pub fn set_outcome_hook(&self, hook: Option<crate::audit::OutcomeHook>) {
        self.shared.audit.set_outcome(hook);
    }

    /// Request counters.
    pub fn accounting(&self) -> &Accounting {
        &self.shared.accounting
    }

    /// Number of requests a query matches.
    pub fn requests(&self, q: &Query) -> u64 {
        self.shared.accounting.count(q)
    }

    /// Connections that carried requests of the user / User-Agent a query names.
    pub fn connections(&self, q: &Query) -> usize {
        self.shared.accounting.connections(q)
    }

    /// The requests RBAC refused so far (empty when RBAC is off).
    pub fn rbac_denials(&self) -> Vec<String> {
        self.shared
            .rbac
            .as_ref()
            .map(|r| r.denials())
            .unwrap_or_default()
    }

    /// Fault injection controls.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// What the configured scenario created.
    pub fn scenario_report(&self) -> Option<&ScenarioReport> {
        self.report.as_ref()
    }

    /// Seeds another scenario.
    pub fn apply_scenario(&self, s: &Scenario) -> Result<ScenarioReport, SimError> {
        scenario::apply(&self.shared.api, s)
    }

    /// An object as JSON (None when missing). `group` "" for core; `ns` "" when cluster scoped.
    pub fn get_json(&self, group: &str, plural: &str, ns: &str, name: &str) -> Option<Value> {
        let def = self.shared.api.registry.by_name((group, plural))?;
        self.shared.api.store.get(&def, ns, name)?.value().ok()
    }

    /// Creates an object directly (API semantics, no HTTP). `keep_status` keeps a given status.
    pub fn create_json(
        &self,
        group: &str,
        plural: &str,
        ns: &str,
        obj: Value,
        keep_status: bool,
    ) -> Result<Value, ApiError> {
        let def = self.shared.api.def((group, plural))?;
        self.shared
            .api
            .create(&def, ns, obj, false, keep_status)?
            .value()
    }

    /// Lists objects directly (namespace "" for all).
    pub fn list_json(&self, group: &str, plural: &str, ns: &str) -> Vec<Value> {
        self.stored(group, plural, ns)
            .iter()
            .filter_map(|o| o.value().ok())
            .collect()
    }

    /// Names of the objects of a resource (namespace "" for all), without parsing them.
    pub fn names(&self, group: &str, plural: &str, ns: &str) -> Vec<String> {
        self.stored(group, plural, ns)
            .iter()
            .map(|o| o.name.clone())
            .collect()
    }

    /// The stored objects of a resource (namespace "" for all); none of a resource not served.
    fn stored(&self, group: &str, plural: &str, ns: &str) -> Vec<Arc<StoredObject>> {
        let Ok(def) = self.shared.api.def((group, plural)) else {
            return Vec::new();
        };
        let filter = selectors::Filter {
            namespace: (!ns.is_empty()).then(|| ns.to_string()),
            ..Default::default()
        };
        self.shared.api.store.list(&def, &filter, None, 0).0
    }

    /// Stops serving, ends watches and stops the controllers.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(server) = self.server.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
        }
        if let Some(t) = self.controllers.take() {
            // The controllers see the stop signal at their next wake-up.
            let _ = tokio::time::timeout(
                Duration::from_secs(5),
                tokio::task::spawn_blocking(move || t.join()),
            )
            .await;
        }
    }
}

impl Drop for SimHandle {
    /// A simulator dropped without `shutdown` still stops serving and stops its controller
    /// thread (without waiting).
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Where `cli::run` writes its kubeconfig when none is given.
pub fn default_kubeconfig_path() -> PathBuf {
    std::env::temp_dir().join("nmo-sim.kubeconfig")
}

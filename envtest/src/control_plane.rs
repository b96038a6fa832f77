//! The control plane: its processes, its credentials, and the clients and helpers built on
//! them.

mod faults;

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node};
use tokio::runtime::Runtime;

use crate::assets;
use crate::calls::{self, within};
use crate::component::Component;
use crate::error::{Error, Result};
use crate::files;
use crate::identity::Identity;
use crate::kubeconfig::{self, Credentials};
use crate::launch::{Launcher, Started};
use crate::layout::Layout;
use crate::manifests::{self, AppliedRbac};
use crate::nodes::{self, Heartbeats, NodeTemplate};
use crate::options::Options;
use crate::pki::{self, Pki};
use crate::process::Process;
use crate::procfs;
use crate::rundir::{self, RunDir};

/// The identity of the controller manager (bound by the default RBAC policy).
const CONTROLLER_MANAGER_USER: &str = "system:kube-controller-manager";
/// The identity of the scheduler (bound by the default RBAC policy).
const SCHEDULER_USER: &str = "system:kube-scheduler";

/// How long one component took to start.
#[derive(Clone, Debug)]
pub struct Startup {
    /// The component.
    pub component: Component,
    /// From spawn to healthy (including any restart after losing a port).
    pub took: Duration,
}

/// A running component.
#[derive(Clone, Debug)]
pub struct ComponentInfo {
    /// The component.
    pub component: Component,
    /// Its pid (not its wrapper's).
    pub pid: u32,
    /// The pid of the `sh` that kills it when this process ends.
    pub wrapper_pid: u32,
    /// Its first port (etcd: the client port; the others: their HTTPS port).
    pub port: u16,
    /// Its log file.
    pub log: PathBuf,
    /// Resident memory now, in bytes (VmRSS), if readable.
    pub rss: Option<u64>,
    /// Peak resident memory, in bytes (VmHWM), if readable.
    pub peak_rss: Option<u64>,
}

struct Running {
    process: Process,
    port: u16,
}

/// A real Kubernetes control plane on loopback. Dropping it stops every process and removes
/// its directory; so does the end of the process that started it, however it ends.
pub struct ControlPlane {
    /// Where internal work runs (health checks, node heartbeats, applies), so that it does not
    /// depend on the caller's runtime. Shut down first when dropped.
    runtime: Option<Runtime>,
    launcher: Launcher,
    url: String,
    pki: Mutex<Pki>,
    ca_der: Vec<u8>,
    processes: Mutex<Vec<Running>>,
    startup: Mutex<Vec<Startup>>,
    credentials: Mutex<HashMap<Identity, Credentials>>,
    /// The admin client of the internal runtime.
    admin: kube::Client,
    heartbeats: Arc<Heartbeats>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A runtime shut down without blocking when dropped (dropping a runtime the normal way
/// panics inside another runtime, where tests call from).
struct RuntimeGuard(Option<Runtime>);

impl RuntimeGuard {
    fn runtime(&self) -> Result<&Runtime> {
        self.0.as_ref().ok_or(Error::Stopping)
    }
}

impl Drop for RuntimeGuard {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// Runs `work` on `runtime` and blocks this thread until it is done. Callable from inside
/// another runtime (it only blocks the calling thread, never nests a runtime).
fn run_blocking<T: Send + 'static>(
    runtime: &Runtime,
    work: impl Future<Output = T> + Send + 'static,
) -> Result<T> {
    let (done, outcome) = std::sync::mpsc::sync_channel(1);
    runtime.spawn(async move {
        let _ = done.send(work.await);
    });
    outcome.recv().map_err(|_| Error::Stopping)
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver, then the controller manager and scheduler if `options`
    /// asks, and waits until each is healthy. Blocks the calling thread (3-5 s on 2 cores);
    /// callable from sync code and from inside a tokio runtime alike.
    pub fn start(options: Options) -> Result<ControlPlane> {
        // Over 80 lines: the start-up steps of the control plane in the order they must run (dirs,
        // certificates, etcd and the API server, the other components, health checks), each a few
        // lines sharing the launcher and the runtime guard.
        let assets = assets::assets_dir(options.assets.as_deref())?;
        for component in Component::ALL {
            if options.wants(component) {
                assets::binary(&assets, component)?;
            }
        }
        let base = options
            .base_dir
            .clone()
            .unwrap_or_else(rundir::default_base);
        let run = Arc::new(RunDir::create(&base, options.keep_logs.as_deref())?);
        let layout = Layout::new(run.path());
        for dir in [
            layout.pki(),
            layout.users(),
            layout.kubeconfigs(),
            layout.logs(),
        ] {
            files::create_dir(&dir)?;
        }
        for component in Component::ALL {
            files::create_dir(&layout.serving_dir(component))?;
        }

        let pki = write_certificates(&layout)?;

        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("nmo-envtest")
            .enable_all()
            .build()
            .map_err(|source| Error::io("starting the control plane's runtime", source))?;
        let runtime = RuntimeGuard(Some(runtime));
        let launcher = Launcher {
            run,
            layout,
            assets,
            options,
        };
        let ca_der = pki.ca_der();
        let admin_credentials = issue(&pki, &launcher.layout, &Identity::admin())?;
        // The probe's port is filled in by the launcher once it has picked one.
        let admin_template =
            kubeconfig::client_config("https://127.0.0.1:1", &ca_der, &admin_credentials)?;

        let core = launcher.clone();
        let (etcd, apiserver) = run_blocking(runtime.runtime()?, async move {
            let etcd = core.etcd().await?;
            let apiserver = core.apiserver(etcd.port, &admin_template).await?;
            Ok::<(Started, Started), Error>((etcd, apiserver))
        })??;

        let url = format!("https://127.0.0.1:{}", apiserver.port);
        let admin_config = kubeconfig::client_config(&url, &ca_der, &admin_credentials)?;
        let admin = {
            let _entered = runtime.runtime()?.enter();
            kube::Client::try_from(admin_config).map_err(Error::Client)?
        };
        let startup = vec![
            Startup {
                component: Component::Etcd,
                took: etcd.took,
            },
            Startup {
                component: Component::ApiServer,
                took: apiserver.took,
            },
        ];
        let processes = vec![
            Running {
                process: etcd.process,
                port: etcd.port,
            },
            Running {
                process: apiserver.process,
                port: apiserver.port,
            },
        ];
        let mut guard = runtime;
        let control_plane = ControlPlane {
            runtime: guard.0.take(),
            url,
            pki: Mutex::new(pki),
            ca_der,
            processes: Mutex::new(processes),
            startup: Mutex::new(startup),
            credentials: Mutex::new(HashMap::from([(Identity::admin(), admin_credentials)])),
            admin,
            heartbeats: Arc::new(Heartbeats::default()),
            launcher,
        };
        let options = control_plane.launcher.options.clone();
        control_plane.ensure(&options)?;
        let keep_alive = nodes::keep_alive(
            control_plane.admin.clone(),
            control_plane.heartbeats.clone(),
            options.node_heartbeat_interval,
        );
        control_plane.runtime()?.spawn(keep_alive);
        Ok(control_plane)
    }

    fn runtime(&self) -> Result<&Runtime> {
        self.runtime.as_ref().ok_or(Error::Stopping)
    }

    /// Starts the components `options` wants that are not running yet (the controller
    /// manager, the scheduler). Other options of a running control plane do not change.
    pub fn ensure(&self, options: &Options) -> Result<()> {
        let mut processes = lock(&self.processes);
        let running = |processes: &[Running], component: Component| {
            processes
                .iter()
                .any(|running| running.process.component() == component)
        };
        for component in [Component::ControllerManager, Component::Scheduler] {
            if !options.wants(component) || running(&processes, component) {
                continue;
            }
            let started = self.start_controller(component)?;
            lock(&self.startup).push(Startup {
                component,
                took: started.took,
            });
            processes.push(Running {
                process: started.process,
                port: started.port,
            });
        }
        Ok(())
    }

    /// Starts the controller manager or the scheduler (on fresh ports) and waits until it is
    /// healthy.
    fn start_controller(&self, component: Component) -> Result<Started> {
        let user = match component {
            Component::ControllerManager => CONTROLLER_MANAGER_USER,
            _ => SCHEDULER_USER,
        };
        let kubeconfig = self.kubeconfig_path(&Identity::user(user, Vec::<String>::new()))?;
        let launcher = self.launcher.clone();
        run_blocking(self.runtime()?, async move {
            match component {
                Component::ControllerManager => launcher.controller_manager(&kubeconfig).await,
                _ => launcher.scheduler(&kubeconfig).await,
            }
        })?
    }

    /// The API server's URL (`https://127.0.0.1:PORT`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The run directory (certificates, kubeconfigs, etcd's data, `logs/`).
    pub fn data_dir(&self) -> &Path {
        self.launcher.layout.root()
    }

    /// The CA certificate (PEM file) the API server's certificate is signed by.
    pub fn ca_cert_path(&self) -> PathBuf {
        self.launcher.layout.ca_cert()
    }

    /// The binaries' directory in use.
    pub fn assets_dir(&self) -> &Path {
        &self.launcher.assets
    }

    /// How long each component took to start, in start order.
    pub fn startup(&self) -> Vec<Startup> {
        lock(&self.startup).clone()
    }

    /// The running components with their pids and memory.
    pub fn components(&self) -> Vec<ComponentInfo> {
        lock(&self.processes)
            .iter()
            .map(|running| {
                let pid = running.process.pid();
                let memory = procfs::memory(pid);
                ComponentInfo {
                    component: running.process.component(),
                    pid,
                    wrapper_pid: running.process.wrapper_pid(),
                    port: running.port,
                    log: running.process.log().to_path_buf(),
                    rss: memory.map(|(rss, _)| rss),
                    peak_rss: memory.map(|(_, peak)| peak),
                }
            })
            .collect()
    }

    /// A component that has exited since the start, as an error with its log's end.
    pub fn check_alive(&self) -> Result<()> {
        for running in lock(&self.processes).iter_mut() {
            if running.process.exit_status().is_some() {
                return Err(running.process.died());
            }
        }
        Ok(())
    }

    /// The certificate and key of `identity`, issued on first use.
    fn credentials(&self, identity: &Identity) -> Result<Credentials> {
        let mut known = lock(&self.credentials);
        if let Some(credentials) = known.get(identity) {
            return Ok(credentials.clone());
        }
        let credentials = issue(&lock(&self.pki), &self.launcher.layout, identity)?;
        known.insert(identity.clone(), credentials.clone());
        Ok(credentials)
    }

    /// The kube client configuration of `identity`: `Send`, `Clone`, and buildable into a
    /// client in whichever runtime will use it (`kube::Client::try_from(config)`).
    pub fn client_config(&self, identity: &Identity) -> Result<kube::Config> {
        kubeconfig::client_config(&self.url, &self.ca_der, &self.credentials(identity)?)
    }

    /// A client as `identity`, for the tokio runtime this is called in (a kube client's
    /// connections belong to the runtime that builds it: build one per runtime).
    pub fn client_as(&self, identity: &Identity) -> Result<kube::Client> {
        tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        kube::Client::try_from(self.client_config(identity)?).map_err(Error::Client)
    }

    /// An admin client (`system:masters`) for the tokio runtime this is called in.
    pub fn admin_client(&self) -> Result<kube::Client> {
        self.client_as(&Identity::admin())
    }

    /// A kubeconfig file for `identity` (for kubectl, or a program in a child process).
    pub fn kubeconfig_path(&self, identity: &Identity) -> Result<PathBuf> {
        let credentials = self.credentials(identity)?;
        let path = self
            .launcher
            .layout
            .kubeconfigs()
            .join(format!("{}.yaml", identity.file_stem()));
        if !path.exists() {
            kubeconfig::write(
                &path,
                &self.url,
                &self.launcher.layout.ca_cert(),
                &credentials,
            )?;
        }
        Ok(path)
    }

    /// `kubectl --kubeconfig <identity's>` with its discovery cache in the run directory;
    /// add the arguments and run it.
    pub fn kubectl(&self, identity: &Identity) -> Result<Command> {
        let mut command = Command::new(assets::kubectl(&self.launcher.assets));
        command
            .arg("--kubeconfig")
            .arg(self.kubeconfig_path(identity)?)
            .arg("--cache-dir")
            .arg(self.launcher.layout.kubectl_cache());
        Ok(command)
    }

    /// Runs `work` on the control plane's runtime and awaits it from any runtime.
    async fn on_runtime<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        self.runtime()?
            .spawn(work)
            .await
            .map_err(|_| Error::Stopping)?
    }

    /// Applies the CustomResourceDefinitions in `paths` (e.g. `deploy/crd.yaml`) and waits
    /// until they are Established. Repeating it is harmless. Returns their names.
    pub async fn install_crds(&self, paths: &[PathBuf]) -> Result<Vec<String>> {
        let client = self.admin.clone();
        let paths = paths.to_vec();
        self.on_runtime(async move { manifests::install_crds(&client, &paths).await })
            .await
    }

    /// Applies the ServiceAccounts, roles and bindings of `paths` exactly as written (e.g.
    /// [`crate::yaml_files_in`]`("deploy/base")`: other kinds are skipped), so that an identity
    /// they bind, such as `Identity::service_account("nmo-system", "nmo")`, has exactly
    /// those rights under the real RBAC authorizer. Repeating it is harmless.
    pub async fn apply_rbac(&self, paths: &[PathBuf]) -> Result<AppliedRbac> {
        let client = self.admin.clone();
        let paths = paths.to_vec();
        self.on_runtime(async move { manifests::apply_rbac(&client, &paths).await })
            .await
    }

    /// Creates a namespace named [`crate::unique_name`]`(prefix)` and returns its name.
    pub async fn create_namespace(&self, prefix: &str) -> Result<String> {
        let client = self.admin.clone();
        let name = crate::names::unique_name(prefix);
        let created = name.clone();
        self.on_runtime(async move {
            let namespaces: kube::Api<Namespace> = kube::Api::all(client);
            let namespace = Namespace {
                metadata: kube::api::ObjectMeta {
                    name: Some(created.clone()),
                    ..Default::default()
                },
                ..Default::default()
            };
            let what = format!("creating namespace {created}");
            match within(what, namespaces.create(&Default::default(), &namespace)).await {
                Ok(_) => Ok(()),
                // A repeat after a lost answer: it is there.
                Err(error) if calls::is_status(&error, 409) => Ok(()),
                Err(error) => Err(error),
            }
        })
        .await?;
        Ok(name)
    }

    /// Registers a Ready node named `name` with `labels` (8 CPUs, 32 GiB, 110 pods) and keeps
    /// it Ready by renewing its Lease (see [`crate::nodes`]). It is schedulable when this
    /// returns: the `node.kubernetes.io/not-ready` taint that admission puts on every new node
    /// is removed at once.
    pub async fn register_node(&self, name: &str, labels: &[(&str, &str)]) -> Result<Node> {
        let template = labels
            .iter()
            .fold(NodeTemplate::new(name), |template, (key, value)| {
                template.label(*key, *value)
            });
        self.register(template).await
    }

    /// Registers a node from `template`; a repeat finds it registered.
    pub async fn register(&self, template: NodeTemplate) -> Result<Node> {
        let client = self.admin.clone();
        let name = template.name.clone();
        let heartbeat = template.heartbeat;
        let node = self
            .on_runtime(async move { nodes::register(&client, &template).await })
            .await?;
        if heartbeat {
            self.heartbeats.start(&name);
        }
        Ok(node)
    }

    /// Stops renewing `node`'s Lease (as if its kubelet died); whether it was renewed.
    pub fn stop_heartbeat(&self, node: &str) -> bool {
        self.heartbeats.stop(node)
    }

    /// Resumes renewing `node`'s Lease.
    pub fn resume_heartbeat(&self, node: &str) {
        self.heartbeats.start(node);
    }

    /// The nodes whose Leases are being renewed.
    pub fn live_nodes(&self) -> Vec<String> {
        self.heartbeats.nodes()
    }
}

/// A fresh CA, the API server's serving certificate and the service-account key pair, written
/// where the layout says.
fn write_certificates(layout: &Layout) -> Result<Pki> {
    let pki = Pki::new()?;
    std::fs::write(layout.ca_cert(), pki.ca_pem())
        .map_err(|source| Error::io("writing the CA certificate", source))?;
    files::write_private(&layout.ca_key(), pki.ca_key_pem().as_bytes())?;
    // Loopback for the tests, the in-cluster names and Service address for completeness.
    let serving = pki.serving(
        "kube-apiserver",
        &[
            "127.0.0.1",
            "localhost",
            "10.0.0.1",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ],
    )?;
    std::fs::write(layout.apiserver_cert(), &serving.cert_pem)
        .map_err(|source| Error::io("writing the API server's certificate", source))?;
    files::write_private(&layout.apiserver_key(), serving.key_pem.as_bytes())?;
    let (sa_private, sa_public) = pki::service_account_key()?;
    files::write_private(&layout.service_account_key(), sa_private.as_bytes())?;
    std::fs::write(layout.service_account_pub(), sa_public)
        .map_err(|source| Error::io("writing the service-account public key", source))?;
    Ok(pki)
}

/// Issues `identity`'s client certificate and writes it with its key.
fn issue(pki: &Pki, layout: &Layout, identity: &Identity) -> Result<Credentials> {
    let pair = pki.client(identity.name(), identity.groups())?;
    let stem = identity.file_stem();
    let credentials = Credentials {
        cert: layout.users().join(format!("{stem}.crt")),
        key: layout.users().join(format!("{stem}.key")),
    };
    std::fs::write(&credentials.cert, &pair.cert_pem)
        .map_err(|source| Error::io(format!("writing {}", credentials.cert.display()), source))?;
    files::write_private(&credentials.key, pair.key_pem.as_bytes())?;
    Ok(credentials)
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // Heartbeats and internal clients first, so nothing talks to a dying server.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
        let mut processes: Vec<Running> = lock(&self.processes).drain(..).collect();
        // Kill all at once, then wait for each.
        for running in &mut processes {
            running.process.close_lifeline();
        }
        for running in processes.iter_mut().rev() {
            running.process.stop();
        }
        drop(processes);
        self.launcher.run.remove();
    }
}

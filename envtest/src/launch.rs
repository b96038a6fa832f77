//! Starting one component: its flags, free ports (retried when another process takes one
//! first), and the wait until it answers its health endpoint.

use std::ffi::OsString;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::assets;
use crate::component::Component;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::options::Options;
use crate::process::Process;
use crate::rundir::RunDir;

/// How many times a component is restarted on fresh ports after losing one to another process.
const PORT_ATTEMPTS: usize = 5;

/// How often readiness is polled.
const POLL: Duration = Duration::from_millis(100);

/// The deadline of one health request.
const PROBE_DEADLINE: Duration = Duration::from_secs(5);

/// The service range: the API server takes the first address for the `kubernetes` Service.
const SERVICE_RANGE: &str = "10.0.0.0/24";

/// What a started component reports.
pub struct Started {
    /// The process.
    pub process: Process,
    /// Its (first) port.
    pub port: u16,
    /// From spawn to ready.
    pub took: Duration,
}

/// What the launcher needs from its control plane.
#[derive(Clone)]
pub struct Launcher {
    pub run: Arc<RunDir>,
    pub layout: Layout,
    pub assets: PathBuf,
    pub options: Options,
}

/// How a component shows it is ready.
enum Probe {
    /// etcd's `/health` over plain HTTP.
    Etcd { port: u16 },
    /// `GET path` through a kube client answers `ok`.
    Http {
        client: kube::Client,
        path: &'static str,
    },
}

/// Why a start attempt failed.
enum Failure {
    /// The component could not listen: another process took its port first.
    PortRace,
    /// Anything else.
    Fatal(Error),
}

impl Launcher {
    fn program(&self, component: Component) -> Result<PathBuf> {
        assets::binary(&self.assets, component)
    }

    fn extra_args(&self, component: Component) -> impl Iterator<Item = OsString> + '_ {
        self.options.extra_args_of(component).map(OsString::from)
    }

    /// etcd on two free loopback ports (client, peer); returns the client port.
    pub async fn etcd(&self) -> Result<Started> {
        let program = self.program(Component::Etcd)?;
        let data = self.layout.etcd_data();
        self.start(Component::Etcd, &program, 2, None, |ports| {
            let client = format!("http://127.0.0.1:{}", ports[0]);
            let peer = format!("http://127.0.0.1:{}", ports[1]);
            let mut args: Vec<OsString> = vec![
                "--name=default".into(),
                flag("--data-dir", &data),
                format!("--listen-client-urls={client}").into(),
                format!("--advertise-client-urls={client}").into(),
                format!("--listen-peer-urls={peer}").into(),
                format!("--initial-advertise-peer-urls={peer}").into(),
                format!("--initial-cluster=default={peer}").into(),
            ];
            args.extend(self.extra_args(Component::Etcd));
            Ok((args, Probe::Etcd { port: ports[0] }))
        })
        .await
    }

    /// kube-apiserver against etcd on `etcd_port`, probed with `admin` (a client config
    /// whose URL's port is replaced by the one picked).
    pub async fn apiserver(&self, etcd_port: u16, admin: &kube::Config) -> Result<Started> {
        self.apiserver_on(etcd_port, self.options.apiserver_port, admin)
            .await
    }

    /// [`Self::apiserver`] on `port` if given (a restart keeps its port, so that its clients
    /// find it again), else on a free one.
    pub async fn apiserver_on(
        &self,
        etcd_port: u16,
        fixed: Option<u16>,
        admin: &kube::Config,
    ) -> Result<Started> {
        let program = self.program(Component::ApiServer)?;
        let layout = &self.layout;
        self.start(Component::ApiServer, &program, 1, fixed, |ports| {
            let mut args: Vec<OsString> = vec![
                format!("--etcd-servers=http://127.0.0.1:{etcd_port}").into(),
                "--bind-address=127.0.0.1".into(),
                "--advertise-address=127.0.0.1".into(),
                format!("--secure-port={}", ports[0]).into(),
                flag("--tls-cert-file", &layout.apiserver_cert()),
                flag("--tls-private-key-file", &layout.apiserver_key()),
                flag("--client-ca-file", &layout.ca_cert()),
                flag("--cert-dir", &layout.serving_dir(Component::ApiServer)),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                flag("--service-account-key-file", &layout.service_account_pub()),
                flag(
                    "--service-account-signing-key-file",
                    &layout.service_account_key(),
                ),
                format!("--service-cluster-ip-range={SERVICE_RANGE}").into(),
                "--authorization-mode=RBAC".into(),
                "--allow-privileged=true".into(),
                // No endpoints for the `kubernetes` Service: with the advertise address on
                // loopback the reconciler only logs an error every 10 s.
                "--endpoint-reconciler-type=none".into(),
            ];
            if !self.options.service_account_admission {
                args.push("--disable-admission-plugins=ServiceAccount".into());
            }
            args.extend(self.extra_args(Component::ApiServer));
            let client =
                kube::Client::try_from(with_port(admin, ports[0])?).map_err(Error::Client)?;
            Ok((
                args,
                Probe::Http {
                    client,
                    path: "/readyz",
                },
            ))
        })
        .await
    }

    /// kube-controller-manager with `kubeconfig`.
    pub async fn controller_manager(&self, kubeconfig: &Path) -> Result<Started> {
        let program = self.program(Component::ControllerManager)?;
        let layout = &self.layout;
        self.start(Component::ControllerManager, &program, 1, None, |ports| {
            let mut args: Vec<OsString> = vec![
                flag("--kubeconfig", kubeconfig),
                flag("--authentication-kubeconfig", kubeconfig),
                flag("--authorization-kubeconfig", kubeconfig),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", ports[0]).into(),
                flag(
                    "--cert-dir",
                    &layout.serving_dir(Component::ControllerManager),
                ),
                "--leader-elect=false".into(),
                "--controllers=*".into(),
                // Each controller under its own ServiceAccount and bootstrap role, as kubeadm
                // runs it, so that they act with the rights they have on a real cluster.
                "--use-service-account-credentials=true".into(),
                flag("--root-ca-file", &layout.ca_cert()),
                flag(
                    "--service-account-private-key-file",
                    &layout.service_account_key(),
                ),
                flag("--cluster-signing-cert-file", &layout.ca_cert()),
                flag("--cluster-signing-key-file", &layout.ca_key()),
                format!("--service-cluster-ip-range={SERVICE_RANGE}").into(),
            ];
            if let Some(grace) = self.options.node_monitor_grace_period {
                args.push(
                    format!("--node-monitor-grace-period={}s", grace.as_secs().max(1)).into(),
                );
            }
            args.extend(self.extra_args(Component::ControllerManager));
            Ok((args, healthz_probe(ports[0])?))
        })
        .await
    }

    /// kube-scheduler with `kubeconfig`.
    pub async fn scheduler(&self, kubeconfig: &Path) -> Result<Started> {
        let program = self.program(Component::Scheduler)?;
        let layout = &self.layout;
        self.start(Component::Scheduler, &program, 1, None, |ports| {
            let mut args: Vec<OsString> = vec![
                flag("--kubeconfig", kubeconfig),
                flag("--authentication-kubeconfig", kubeconfig),
                flag("--authorization-kubeconfig", kubeconfig),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", ports[0]).into(),
                flag("--cert-dir", &layout.serving_dir(Component::Scheduler)),
                "--leader-elect=false".into(),
            ];
            args.extend(self.extra_args(Component::Scheduler));
            Ok((args, healthz_probe(ports[0])?))
        })
        .await
    }

    /// Starts `component` on `port_count` ports (or `fixed`), retrying on fresh ports when it
    /// loses one to another process, until its probe answers.
    async fn start(
        &self,
        component: Component,
        program: &Path,
        port_count: usize,
        fixed: Option<u16>,
        command: impl Fn(&[u16]) -> Result<(Vec<OsString>, Probe)>,
    ) -> Result<Started> {
        let log = self.layout.log(component);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let ports = match fixed {
                Some(port) => {
                    ensure_free(component, port)?;
                    vec![port]
                }
                None => free_ports(port_count)?,
            };
            let (args, probe) = command(&ports)?;
            let began = Instant::now();
            let mut process = Process::spawn(component, program, &args, log.clone(), &self.run)?;
            match wait_ready(&mut process, &probe, self.options.start_timeout).await {
                Ok(()) => {
                    return Ok(Started {
                        process,
                        port: ports[0],
                        took: began.elapsed(),
                    });
                }
                Err(Failure::PortRace) if fixed.is_none() && attempt < PORT_ATTEMPTS => {
                    tracing::warn!(%component, ?ports, attempt, "lost a port to another process: retrying on fresh ports");
                }
                Err(Failure::PortRace) => {
                    return Err(Error::PortInUse {
                        component,
                        port: ports[0],
                    });
                }
                Err(Failure::Fatal(error)) => return Err(error),
            }
        }
    }
}

/// `--name=path`.
fn flag(name: &str, path: &Path) -> OsString {
    let mut flag = OsString::from(format!("{name}="));
    flag.push(path.as_os_str());
    flag
}

/// `config` with its URL's port replaced.
fn with_port(config: &kube::Config, port: u16) -> Result<kube::Config> {
    let url = format!("https://127.0.0.1:{port}");
    let mut config = config.clone();
    config.cluster_url = url.parse().map_err(|error: http::uri::InvalidUri| {
        Error::io(url.clone(), std::io::Error::other(error.to_string()))
    })?;
    Ok(config)
}

/// `/healthz` of a component serving a self-signed certificate of its own; anonymous requests
/// to it are allowed by default.
fn healthz_probe(port: u16) -> Result<Probe> {
    let mut config = kube::Config::new(http::Uri::from_static("https://127.0.0.1"));
    config.accept_invalid_certs = true;
    let client = kube::Client::try_from(with_port(&config, port)?).map_err(Error::Client)?;
    Ok(Probe::Http {
        client,
        path: "/healthz",
    })
}

/// Ports free on 127.0.0.1 now. All are held until all are picked, so they differ.
pub fn free_ports(count: usize) -> Result<Vec<u16>> {
    let listeners = (0..count)
        .map(|_| TcpListener::bind(("127.0.0.1", 0)))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|source| Error::io("picking a free port on 127.0.0.1", source))?;
    listeners
        .iter()
        .map(|listener| listener.local_addr().map(|address| address.port()))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|source| Error::io("picking a free port on 127.0.0.1", source))
}

/// An error now if `port` is taken, rather than after the component has started up.
fn ensure_free(component: Component, port: u16) -> Result<()> {
    match TcpListener::bind(("127.0.0.1", port)) {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AddrInUse => {
            Err(Error::PortInUse { component, port })
        }
        Err(source) => Err(Error::io(format!("checking port {port}"), source)),
    }
}

async fn wait_ready(
    process: &mut Process,
    probe: &Probe,
    deadline: Duration,
) -> Result<(), Failure> {
    let began = Instant::now();
    loop {
        if process.exit_status().is_some() {
            return Err(if process.lost_a_port_race() {
                Failure::PortRace
            } else {
                Failure::Fatal(process.died())
            });
        }
        let last = match probe.check().await {
            Ok(()) => return Ok(()),
            Err(answer) => answer,
        };
        if began.elapsed() > deadline {
            return Err(Failure::Fatal(Error::NotReady {
                component: process.component(),
                waited: deadline,
                last,
                log: process.log().to_path_buf(),
                tail: process.log_tail(25),
            }));
        }
        tokio::time::sleep(POLL).await;
    }
}

impl Probe {
    /// `Ok` when ready, else what was answered.
    async fn check(&self) -> Result<(), String> {
        let answer = match self {
            Probe::Etcd { port } => tokio::time::timeout(PROBE_DEADLINE, etcd_health(*port)).await,
            Probe::Http { client, path } => {
                tokio::time::timeout(PROBE_DEADLINE, http_ok(client, path)).await
            }
        };
        match answer {
            Ok(result) => result,
            Err(_) => Err(format!("no answer within {PROBE_DEADLINE:?}")),
        }
    }
}

async fn http_ok(client: &kube::Client, path: &str) -> Result<(), String> {
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(|error| error.to_string())?;
    match client.request_text(request).await {
        Ok(body) if body.trim() == "ok" => Ok(()),
        Ok(body) => Err(shorten(&body)),
        Err(error) => Err(shorten(&error.to_string())),
    }
}

async fn etcd_health(port: u16) -> Result<(), String> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|error| error.to_string())?;
    stream
        .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .map_err(|error| error.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .map_err(|error| error.to_string())?;
    if response.starts_with("HTTP/1.0 200") && response.contains("\"health\":\"true\"") {
        Ok(())
    } else {
        Err(shorten(&response))
    }
}

fn shorten(text: &str) -> String {
    text.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_differ() {
        let ports = free_ports(3).unwrap();
        assert_eq!(ports.len(), 3);
        assert!(ports[0] != ports[1] && ports[1] != ports[2] && ports[0] != ports[2]);
    }

    #[test]
    fn a_taken_fixed_port_is_an_error_naming_it() {
        let taken = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = taken.local_addr().unwrap().port();
        let error = ensure_free(Component::ApiServer, port).unwrap_err();
        assert!(matches!(error, Error::PortInUse { port: p, .. } if p == port));
        drop(taken);
        ensure_free(Component::ApiServer, port).unwrap();
    }
}

//! `nmo run` as a child process, so that its memory and CPU are its own and not mixed with the
//! simulator's or the driver's; and reading one of its counters from its metrics endpoint.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::error::BenchError;
use super::procstat::{self, ProcessUsage};
use crate::demo::DemoError;

/// nmo's switch for h2c to an `http://` API server (`--kube-api-http2-prior-knowledge`).
const H2C_VARIABLE: &str = "NMO_KUBE_API_HTTP2_PRIOR_KNOWLEDGE";

/// A running `nmo run`; killed when dropped.
pub struct OperatorProcess {
    child: Child,
    log: PathBuf,
}

impl OperatorProcess {
    /// Starts `binary run` against the cluster of `kubeconfig`, without metrics, probe or
    /// webhook servers; its log (warnings and errors) goes to `log`.
    /// With `metrics`, its metrics are served there (to read its own counters at the end).
    pub fn spawn(
        binary: &Path,
        kubeconfig: &Path,
        eviction_rate: Option<f64>,
        metrics: Option<std::net::SocketAddr>,
        log: &Path,
    ) -> Result<OperatorProcess, BenchError> {
        let extra: Vec<String> = eviction_rate
            .map(|rate| vec!["--eviction-rate".to_string(), rate.to_string()])
            .unwrap_or_default();
        Self::launch(binary, kubeconfig, &extra, &[], metrics, log)
    }

    /// As [`OperatorProcess::spawn`], with `extra` flags for `nmo run` and environment
    /// variables `envs` (the log is appended to when it exists, so that a restarted replica
    /// keeps its predecessor's lines).
    pub fn spawn_with(
        binary: &Path,
        kubeconfig: &Path,
        extra: &[String],
        envs: &[(&str, &str)],
        log: &Path,
    ) -> Result<OperatorProcess, BenchError> {
        Self::launch(binary, kubeconfig, extra, envs, None, log)
    }

    fn launch(
        binary: &Path,
        kubeconfig: &Path,
        extra: &[String],
        envs: &[(&str, &str)],
        metrics: Option<std::net::SocketAddr>,
        log: &Path,
    ) -> Result<OperatorProcess, BenchError> {
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        let metrics = metrics.map_or_else(|| "0".to_string(), |addr| addr.to_string());
        let mut command = Command::new(binary);
        command
            .args([
                "run",
                "--metrics-bind-address",
                metrics.as_str(),
                "--health-probe-bind-address",
                "0",
                "--webhook-port",
                "0",
            ])
            .args(extra)
            .env("KUBECONFIG", kubeconfig)
            // HTTP/2 without TLS (h2c) to the simulator, multiplexed as nmo's requests are on a
            // real API server (over TLS, ALPN); `NMO_KUBE_API_HTTP2_PRIOR_KNOWLEDGE=false nmo
            // bench` runs it over HTTP/1.1. An environment variable, not a flag: an older nmo
            // binary (`--nmo`) ignores it.
            .env(
                H2C_VARIABLE,
                std::env::var(H2C_VARIABLE).unwrap_or_else(|_| "true".to_string()),
            )
            // The bench scrapes plain HTTP. An environment variable, not a flag, as above.
            .env("NMO_METRICS_SECURE", "false")
            .env("RUST_LOG", "warn")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file);
        let child = command.spawn().map_err(|source| BenchError::Spawn {
            binary: binary.display().to_string(),
            source,
        })?;
        Ok(OperatorProcess {
            child,
            log: log.to_path_buf(),
        })
    }

    /// Its resource use so far.
    pub fn usage(&self) -> Result<ProcessUsage, BenchError> {
        Ok(procstat::usage(self.child.id())?)
    }

    /// Whether it exited (it should not, until killed).
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Waits until `watching` says it watches NodeMaintenances (its start-up is over), asking
    /// every `poll`; fails at once if it exits, or after `timeout`.
    pub async fn wait_watching(
        &mut self,
        timeout: Duration,
        poll: Duration,
        mut watching: impl FnMut() -> Result<bool, BenchError>,
    ) -> Result<(), BenchError> {
        let deadline = Instant::now() + timeout;
        while !watching()? {
            if self.exited() {
                return Err(BenchError::OperatorExited(self.log.display().to_string()));
            }
            if Instant::now() > deadline {
                return Err(DemoError::Timeout {
                    what: "nmo run to watch NodeMaintenances".into(),
                    after: timeout,
                }
                .into());
            }
            tokio::time::sleep(poll).await;
        }
        Ok(())
    }

    /// Where its log is.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Stops it (by its own pid) and reaps it.
    pub fn stop(mut self) {
        self.kill();
    }

    /// Kills it at once (SIGKILL, as `kill -9` would), by its own pid, and reaps it.
    pub fn kill_now(mut self) {
        self.kill();
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free local port for the operator's metrics (bound and released: another process could
/// take it meanwhile, which only loses the counter).
pub fn free_local_addr() -> Option<std::net::SocketAddr> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .ok()
}

/// The value of counter `name` served at `addr` (`/metrics`, OpenMetrics text), if any.
pub async fn scrape_counter(addr: std::net::SocketAddr, name: &str) -> Option<u64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let read = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .await
            .ok()?;
        let mut body = String::new();
        stream.read_to_string(&mut body).await.ok()?;
        body.lines()
            .find(|line| line.starts_with(name) && line[name.len()..].starts_with(' '))
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|value| value.parse::<u64>().ok())
    };
    tokio::time::timeout(std::time::Duration::from_secs(5), read)
        .await
        .ok()
        .flatten()
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

//! `nmo run` as a child process, so that its memory and CPU are its own and not mixed with the
//! simulator's or the driver's.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::error::BenchError;
use super::procstat::{self, ProcessUsage};

/// A running `nmo run`; killed when dropped.
pub struct OperatorProcess {
    child: Child,
    log: PathBuf,
}

impl OperatorProcess {
    /// Starts `binary run` against the cluster of `kubeconfig`, without metrics, probe or
    /// webhook servers; its log (warnings and errors) goes to `log`.
    pub fn spawn(
        binary: &Path,
        kubeconfig: &Path,
        eviction_rate: Option<f64>,
        log: &Path,
    ) -> Result<OperatorProcess, BenchError> {
        let mut args = Vec::new();
        if let Some(rate) = eviction_rate {
            args.extend(["--eviction-rate".to_string(), rate.to_string()]);
        }
        Self::spawn_with(binary, kubeconfig, &args, &[], log)
    }

    /// [`OperatorProcess::spawn`] with more flags and environment variables (a log appended to
    /// when it exists, so that a restarted replica keeps its predecessor's lines).
    pub fn spawn_with(
        binary: &Path,
        kubeconfig: &Path,
        args: &[String],
        envs: &[(&str, &str)],
        log: &Path,
    ) -> Result<OperatorProcess, BenchError> {
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        let mut command = Command::new(binary);
        command
            .args([
                "run",
                "--metrics-bind-address",
                "0",
                "--health-probe-bind-address",
                "0",
                "--webhook-port",
                "0",
            ])
            .args(args)
            .env("KUBECONFIG", kubeconfig)
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

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

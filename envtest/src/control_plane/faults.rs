//! Faults of the control plane's own processes, for tests of how a client lives through them:
//! a component killed (a crash, an OOM kill: its connections are reset) or stopped gracefully
//! (kube-apiserver sends HTTP/2 GOAWAY and ends its watches), started again on the same port
//! (a restart, a control-plane upgrade), or paused and resumed (a frozen process or machine:
//! its TCP connections stay open and nothing answers on them, as over a half-open connection).
//!
//! Signals are sent with `kill(1)`, as the rest of the harness does, so no `unsafe` is needed.

use std::time::{Duration, Instant};

use super::{ControlPlane, Running, lock, run_blocking};
use crate::component::Component;
use crate::error::{Error, Result};
use crate::identity::Identity;

/// How long a killed component may take to be gone.
const KILL_DEADLINE: Duration = Duration::from_secs(10);
/// How long a gracefully stopped component may take (kube-apiserver drains its requests and
/// watches first; its own default shutdown delay is 0 s here, its request timeout 60 s).
const TERMINATE_DEADLINE: Duration = Duration::from_secs(75);

impl ControlPlane {
    /// SIGKILLs `component` and waits until it is gone. Its connections are reset; its port is
    /// free for [`ControlPlane::restart`].
    pub fn kill(&self, component: Component) -> Result<()> {
        self.stop_with(component, "KILL", KILL_DEADLINE)
    }

    /// SIGTERMs `component` and waits until it has shut down (kube-apiserver's graceful
    /// shutdown: GOAWAY on its HTTP/2 connections, watches ended).
    pub fn terminate(&self, component: Component) -> Result<()> {
        self.stop_with(component, "TERM", TERMINATE_DEADLINE)
    }

    /// SIGSTOPs `component`: it keeps its connections and answers nothing until
    /// [`ControlPlane::resume`].
    pub fn pause(&self, component: Component) -> Result<()> {
        self.with_running(component, |running| running.process.signal("STOP"))
    }

    /// SIGCONTs a paused `component`.
    pub fn resume(&self, component: Component) -> Result<()> {
        self.with_running(component, |running| running.process.signal("CONT"))
    }

    /// Starts a killed or terminated component again and waits until it is ready; returns how
    /// long that took. kube-apiserver comes back on its port and against the same etcd, so its
    /// clients keep their URL and only have to reconnect; the controller manager and the
    /// scheduler come back on fresh ports of their own, with fresh informers (what a test that
    /// restarted the API server leaves to the next: controllers that are not still backing off
    /// from the outage). etcd cannot be restarted.
    pub fn restart(&self, component: Component) -> Result<Duration> {
        if component == Component::Etcd {
            return Err(Error::Fault {
                component,
                reason: "etcd cannot be restarted".into(),
            });
        }
        let mut processes = lock(&self.processes);
        let etcd_port = processes
            .iter()
            .find(|running| running.process.component() == Component::Etcd)
            .map(|running| running.port)
            .ok_or_else(|| not_running(Component::Etcd))?;
        let index = processes
            .iter()
            .position(|running| running.process.component() == component)
            .ok_or_else(|| not_running(component))?;
        if processes[index].process.exit_status().is_none() {
            return Err(Error::Fault {
                component,
                reason: "it still runs: kill or terminate it first".into(),
            });
        }
        let began = Instant::now();
        let started = if component == Component::ApiServer {
            let port = processes[index].port;
            let admin = self.client_config(&Identity::admin())?;
            let launcher = self.launcher.clone();
            run_blocking(self.runtime()?, async move {
                launcher.apiserver_on(etcd_port, Some(port), &admin).await
            })??
        } else {
            self.start_controller(component)?
        };
        let took = began.elapsed();
        // The old entry's wrapper has exited: dropping it only reaps it.
        processes[index] = Running {
            process: started.process,
            port: started.port,
        };
        Ok(took)
    }

    /// Signals `component` and waits up to `deadline` until it has exited.
    fn stop_with(&self, component: Component, signal: &str, deadline: Duration) -> Result<()> {
        self.with_running(component, |running| {
            running.process.signal(signal)?;
            if running.process.wait_exit(deadline) {
                Ok(())
            } else {
                Err(Error::Timeout {
                    what: format!("{component} stopping after SIG{signal}"),
                    waited: deadline,
                })
            }
        })
    }

    /// Runs `fault` on the running process of `component`.
    fn with_running(
        &self,
        component: Component,
        fault: impl FnOnce(&mut Running) -> Result<()>,
    ) -> Result<()> {
        let mut processes = lock(&self.processes);
        let running = processes
            .iter_mut()
            .find(|running| running.process.component() == component)
            .ok_or_else(|| not_running(component))?;
        if running.process.exit_status().is_some() {
            return Err(not_running(component));
        }
        fault(running)
    }
}

fn not_running(component: Component) -> Error {
    Error::Fault {
        component,
        reason: "it is not running".into(),
    }
}

//! The two replicas of the soak: `nmo run --leader-elect` child processes, each with its own
//! token (so the simulator counts and audits them apart) and its own HOSTNAME per process (so
//! its leader election identity says which process holds the lease). A replica that exits (it
//! lost its leadership) is started again, as Kubernetes restarts a container; one can be
//! killed with SIGKILL, as `kill -9` would.

use std::path::{Path, PathBuf};

use super::audit::Audit;
use crate::bench::error::BenchError;
use crate::bench::process::OperatorProcess;

/// One replica slot: its identity towards the API server and its current process.
struct Replica {
    name: &'static str,
    user: String,
    kubeconfig: PathBuf,
    log: PathBuf,
    process: Option<OperatorProcess>,
    host: String,
    generation: u32,
    peak_rss_bytes: u64,
    exits: u32,
    kills: u32,
    /// Killed and kept down until the other replica leads (so leadership really moves).
    down: bool,
}

/// Both replicas.
pub struct Replicas {
    binary: PathBuf,
    args: Vec<String>,
    slots: Vec<Replica>,
    audit: Audit,
}

/// What the replicas went through.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct ReplicaFigures {
    /// Processes killed with SIGKILL.
    pub kills: u32,
    /// Processes that exited by themselves (leadership lost) and were started again.
    pub exits: u32,
    /// The highest peak resident set (VmHWM) of any replica process, bytes.
    pub peak_rss_bytes: u64,
}

impl Replicas {
    /// Starts one replica per `(name, user, kubeconfig)`, each `binary run` with `args`; logs
    /// go to `dir`.
    pub fn start(
        binary: &Path,
        args: Vec<String>,
        replicas: &[(&'static str, &str, PathBuf)],
        dir: &Path,
        audit: Audit,
    ) -> Result<Replicas, BenchError> {
        let mut all = Replicas {
            binary: binary.to_path_buf(),
            args,
            slots: replicas
                .iter()
                .map(|(name, user, kubeconfig)| Replica {
                    name,
                    user: (*user).to_string(),
                    kubeconfig: kubeconfig.clone(),
                    log: dir.join(format!("soak-{name}.nmo.log")),
                    process: None,
                    host: String::new(),
                    generation: 0,
                    peak_rss_bytes: 0,
                    exits: 0,
                    kills: 0,
                    down: false,
                })
                .collect(),
            audit,
        };
        for index in 0..all.slots.len() {
            all.launch(index)?;
        }
        Ok(all)
    }

    fn launch(&mut self, index: usize) -> Result<(), BenchError> {
        let slot = &mut self.slots[index];
        slot.generation += 1;
        slot.host = format!("soak-{}-{}", slot.name, slot.generation);
        self.audit.started(&slot.user, &slot.host);
        let process = OperatorProcess::spawn_with(
            &self.binary,
            &slot.kubeconfig,
            &self.args,
            &[("HOSTNAME", slot.host.as_str())],
            &slot.log,
        )?;
        slot.process = Some(process);
        Ok(())
    }

    /// Samples the replicas' memory and starts again any that exited.
    pub fn tend(&mut self) -> Result<(), BenchError> {
        for index in 0..self.slots.len() {
            let slot = &mut self.slots[index];
            if slot.down {
                continue;
            }
            let exited = slot.process.as_mut().is_none_or(OperatorProcess::exited);
            if exited {
                slot.exits += 1;
                slot.process = None;
                self.launch(index)?;
                continue;
            }
            if let Some(usage) = slot.process.as_ref().and_then(|p| p.usage().ok()) {
                slot.peak_rss_bytes = slot.peak_rss_bytes.max(usage.peak_rss_bytes);
            }
        }
        Ok(())
    }

    /// The replica whose current process holds the leader lease as `holder`, by name.
    pub fn leader(&self, holder: &str) -> Option<&'static str> {
        self.slots
            .iter()
            .find(|slot| holder.starts_with(&format!("{}_", slot.host)))
            .map(|slot| slot.name)
    }

    /// Kills the replica `name` with SIGKILL; it stays down until [`Replicas::revive`].
    pub fn kill(&mut self, name: &str) {
        let Some(slot) = self.slots.iter_mut().find(|slot| slot.name == name) else {
            return;
        };
        if let Some(process) = slot.process.take() {
            if let Ok(usage) = process.usage() {
                slot.peak_rss_bytes = slot.peak_rss_bytes.max(usage.peak_rss_bytes);
            }
            process.kill_now();
        }
        slot.kills += 1;
        slot.down = true;
    }

    /// Starts the replicas killed before again (they come back as standbys).
    pub fn revive(&mut self) -> Result<(), BenchError> {
        for index in 0..self.slots.len() {
            if std::mem::take(&mut self.slots[index].down) {
                self.launch(index)?;
            }
        }
        Ok(())
    }

    /// Whether a replica is kept down.
    pub fn any_down(&self) -> bool {
        self.slots.iter().any(|slot| slot.down)
    }

    /// Where replica `name`'s log is.
    pub fn log(&self, name: &str) -> Option<&Path> {
        self.slots
            .iter()
            .find(|slot| slot.name == name)
            .map(|slot| slot.log.as_path())
    }

    /// What the replicas went through so far.
    pub fn figures(&self) -> ReplicaFigures {
        ReplicaFigures {
            kills: self.slots.iter().map(|s| s.kills).sum(),
            exits: self.slots.iter().map(|s| s.exits).sum(),
            peak_rss_bytes: self
                .slots
                .iter()
                .map(|s| s.peak_rss_bytes)
                .max()
                .unwrap_or(0),
        }
    }

    /// Stops every replica (by their own pids).
    pub fn stop(self) {
        for slot in self.slots {
            if let Some(process) = slot.process {
                process.stop();
            }
        }
    }
}

//! The directory of one control plane (certificates, kubeconfigs, etcd's data, logs), removed
//! however the process that owns it ends.
//!
//! A reaper, `sh` in a process group of its own, reads the pids of the control plane's
//! processes from a pipe whose other end only the owning process holds. The kernel closes that
//! end when the owner exits in any way (return from `main` without dropping statics, panic,
//! `kill -9`); the reaper then waits for those processes to be gone (each dies with the owner,
//! see `process.rs`) and removes the directory. A directory whose owner is dead and whose
//! reaper did not finish (the machine stopped, someone killed the reaper) is removed, with any
//! process still running from it, by the next start.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::procfs::{self, ProcessId};

/// Names of run directories: `run-<owner pid>-<owner start time>-<sequence>`.
const PREFIX: &str = "run-";

/// The file listing the pids started from a run directory, for the clean-up of stale runs.
const PIDS_FILE: &str = "pids";

/// The reaper: collects pids until its stdin ends, waits (10 s at most: they get SIGKILL) for
/// them to be gone, keeps the logs if asked, removes the directory.
const REAPER_SCRIPT: &str = r#"
dir=$1
keep_logs=$2
pids=
while IFS= read -r pid; do pids="$pids $pid"; done
# The owner closed the pipe (or died): wait for its processes, then remove their directory.
tries=0
while [ "$tries" -lt 200 ]; do
  alive=
  for pid in $pids; do
    state=
    { read -r _ _ state _ < "/proc/$pid/stat"; } 2>/dev/null
    if [ -n "$state" ] && [ "$state" != Z ]; then alive=1; fi
  done
  [ -z "$alive" ] && break
  sleep 0.05
  tries=$((tries + 1))
done
if [ -n "$keep_logs" ] && [ -d "$dir/logs" ]; then
  mkdir -p "$keep_logs" && cp -r "$dir/logs" "$keep_logs/${dir##*/}"
fi
rm -rf -- "$dir"
"#;

/// How long dropping waits for the reaper.
const REAPER_DEADLINE: Duration = Duration::from_secs(15);

static SEQUENCE: AtomicU32 = AtomicU32::new(0);

/// The default parent of run directories: memory-backed /dev/shm when there is one (etcd
/// syncs its writes to disk, slowly on a loaded machine), else the temporary directory.
pub fn default_base() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.join("nmo-envtest")
    } else {
        std::env::temp_dir().join("nmo-envtest")
    }
}

/// One control plane's directory and its reaper.
pub struct RunDir {
    path: PathBuf,
    reaper: Mutex<Option<Child>>,
    /// Only this process holds the write end: closing it (or dying) starts the reaper.
    lifeline: Mutex<Option<ChildStdin>>,
}

impl RunDir {
    /// Removes stale runs under `base`, then creates a fresh directory with its reaper, which
    /// copies the run's `logs/` into `keep_logs` (if given) before removing it.
    pub fn create(base: &Path, keep_logs: Option<&Path>) -> Result<RunDir> {
        std::fs::create_dir_all(base)
            .map_err(|source| Error::io(format!("creating {}", base.display()), source))?;
        clean_stale(base);
        let owner = procfs::this_process().ok_or_else(|| {
            Error::io(
                "reading /proc/self/stat",
                std::io::Error::other("this process is not in /proc"),
            )
        })?;
        let name = format!(
            "{PREFIX}{}-{}-{}",
            owner.pid,
            owner.start_time,
            SEQUENCE.fetch_add(1, Ordering::Relaxed)
        );
        let path = base.join(name);
        std::fs::create_dir(&path)
            .map_err(|source| Error::io(format!("creating {}", path.display()), source))?;
        let spawned = Command::new("sh")
            .arg("-c")
            .arg(REAPER_SCRIPT)
            .arg("nmo-envtest-reaper")
            .arg(&path)
            .arg(keep_logs.map(Path::as_os_str).unwrap_or_default())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group: a Ctrl-C meant for the tests does not stop the clean-up.
            .process_group(0)
            .spawn();
        let mut reaper = match spawned {
            Ok(reaper) => reaper,
            Err(source) => {
                let _ = std::fs::remove_dir_all(&path);
                return Err(Error::Spawn {
                    what: "the reaper (sh)".into(),
                    source,
                });
            }
        };
        let lifeline = reaper.stdin.take();
        Ok(RunDir {
            path,
            reaper: Mutex::new(Some(reaper)),
            lifeline: Mutex::new(lifeline),
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Hands `pids` to the reaper, and records them for the clean-up of a stale run.
    pub fn watch(&self, pids: &[u32]) -> Result<()> {
        let lines: String = pids.iter().map(|pid| format!("{pid}\n")).collect();
        let record = self.path.join(PIDS_FILE);
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&record)
            .and_then(|mut file| file.write_all(lines.as_bytes()))
            .map_err(|source| Error::io(format!("writing {}", record.display()), source))?;
        let mut lifeline = self
            .lifeline
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(pipe) = lifeline.as_mut() {
            pipe.write_all(lines.as_bytes())
                .and_then(|()| pipe.flush())
                .map_err(|source| Error::io("telling the reaper the pids", source))?;
        }
        Ok(())
    }

    /// Lets the reaper remove the directory (once the watched processes are gone) and waits
    /// for it; removes the directory itself if the reaper does not.
    pub fn remove(&self) {
        drop(
            self.lifeline
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .take(),
        );
        if let Some(mut reaper) = self
            .reaper
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
        {
            let started = Instant::now();
            while matches!(reaper.try_wait(), Ok(None)) && started.elapsed() < REAPER_DEADLINE {
                std::thread::sleep(Duration::from_millis(10));
            }
            if matches!(reaper.try_wait(), Ok(None)) {
                let _ = reaper.kill();
                let _ = reaper.wait();
            }
        }
        if self.path.exists() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        self.remove();
    }
}

/// The owner of a run directory, from its name.
fn owner_of(name: &str) -> Option<ProcessId> {
    let mut parts = name.strip_prefix(PREFIX)?.split('-');
    let pid = parts.next()?.parse().ok()?;
    let start_time = parts.next()?.parse().ok()?;
    Some(ProcessId { pid, start_time })
}

/// Removes the run directories under `base` whose owner is gone, killing any process still
/// running from one. Returns how many were removed.
pub fn clean_stale(base: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(base) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = owner_of(&name.to_string_lossy()) else {
            continue;
        };
        if procfs::live(owner.pid) == Some(owner) {
            continue;
        }
        let dir = entry.path();
        kill_leftovers(&dir);
        if std::fs::remove_dir_all(&dir).is_ok() {
            tracing::info!(dir = %dir.display(), "removed the data of a dead test run");
            removed += 1;
        }
    }
    removed
}

/// SIGKILLs the processes a stale run recorded that still run from its directory (a pid
/// reused by an unrelated process does not mention the directory).
fn kill_leftovers(dir: &Path) {
    let Ok(pids) = std::fs::read_to_string(dir.join(PIDS_FILE)) else {
        return;
    };
    for pid in pids
        .lines()
        .filter_map(|line| line.trim().parse::<u32>().ok())
    {
        if procfs::is_alive(pid) && procfs::command_line_mentions(pid, dir) {
            tracing::warn!(pid, dir = %dir.display(), "killing a process left by a dead test run");
            let _ = Command::new("sh")
                .arg("-c")
                .arg("kill -KILL \"$1\"")
                .arg("sh")
                .arg(pid.to_string())
                .status();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("nmo-envtest-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let started = Instant::now();
        while !done() {
            assert!(started.elapsed() < Duration::from_secs(20), "{what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn names_carry_their_owner() {
        let owner = owner_of("run-42-123456-7").unwrap();
        assert_eq!((owner.pid, owner.start_time), (42, 123456));
        assert!(owner_of("something-else").is_none());
    }

    #[test]
    fn the_reaper_removes_the_directory_once_the_watched_process_is_gone() {
        let base = scratch("reaper");
        let run = RunDir::create(&base, None).unwrap();
        let path = run.path().to_path_buf();
        std::fs::write(path.join("data"), "x").unwrap();
        let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
        run.watch(&[sleeper.id()]).unwrap();
        // Forget the handle as a dying process would: the reaper must wait for the sleeper.
        drop(run.lifeline.lock().unwrap().take());
        std::thread::sleep(Duration::from_millis(300));
        assert!(path.exists(), "removed while a watched process still ran");
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
        wait_until("the reaper removes the directory", || !path.exists());
        drop(run);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn logs_are_kept_where_asked() {
        let base = scratch("keep-base");
        let keep = scratch("keep-logs");
        let run = RunDir::create(&base, Some(&keep)).unwrap();
        std::fs::create_dir(run.path().join("logs")).unwrap();
        std::fs::write(run.path().join("logs/etcd.log"), "etcd says hello").unwrap();
        let name = run.path().file_name().unwrap().to_owned();
        drop(run);
        let kept = std::fs::read_to_string(keep.join(name).join("etcd.log")).unwrap();
        assert_eq!(kept, "etcd says hello");
        std::fs::remove_dir_all(&base).unwrap();
        std::fs::remove_dir_all(&keep).unwrap();
    }

    #[test]
    fn stale_runs_are_removed_with_their_processes_and_live_ones_kept() {
        let base = scratch("stale");
        // A dead owner: a child that has exited.
        let mut gone = Command::new("true").spawn().unwrap();
        let dead_pid = gone.id();
        gone.wait().unwrap();
        let stale = base.join(format!("{PREFIX}{dead_pid}-1-0"));
        std::fs::create_dir(&stale).unwrap();
        // A process still running from it: its command line mentions the directory.
        let mut leftover = Command::new("sh")
            .arg("-c")
            .arg("while :; do sleep 0.1; done")
            .arg(&stale)
            .spawn()
            .unwrap();
        std::fs::write(stale.join(PIDS_FILE), format!("{}\n", leftover.id())).unwrap();
        // Right after spawn the kernel may not have filled in the new command line yet.
        wait_until("the leftover's command line is set", || {
            procfs::command_line_mentions(leftover.id(), &stale)
        });
        let live = RunDir::create(&base, None).unwrap();

        assert!(!stale.exists(), "the stale run is removed");
        let status = leftover.wait().unwrap();
        assert!(!status.success(), "the leftover was killed: {status}");
        assert!(live.path().exists(), "a live run is kept");
        assert_eq!(clean_stale(&base), 0);
        assert!(live.path().exists());
        drop(live);
        std::fs::remove_dir_all(&base).unwrap();
    }
}

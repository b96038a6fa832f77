//! One component process that dies with the process that started it, without `unsafe`.
//!
//! Each component runs under a small `sh` wrapper whose stdin is a pipe from this process. The
//! wrapper starts the component in the background (output appended to its log file), prints its
//! pid, and SIGKILLs it the moment that pipe reports end-of-file: when the `Process` is dropped,
//! and equally when this process exits in any way (the kernel closes the pipe's write end, held
//! by nobody else: std opens pipes close-on-exec). SIGKILL, not SIGTERM: the data is thrown away
//! anyway, and a kube-apiserver's graceful shutdown takes seconds. The wrapper also exits when
//! the component exits by itself, so its exit status is the component's.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crate::component::Component;
use crate::error::{Error, Result};
use crate::rundir::RunDir;

/// `$1` the log file, then the component's command line.
const WRAPPER_SCRIPT: &str = r#"
log=$1; shift
exec 3<&0 0</dev/null
"$@" 3<&- >>"$log" 2>&1 &
child=$!
echo "$child"
exec 1>/dev/null
{ read -r _ <&3; kill -KILL "$child" 2>/dev/null; } &
watcher=$!
exec 3<&-
wait "$child"
status=$?
kill "$watcher" 2>/dev/null
exit "$status"
"#;

/// How long stopping waits for the wrapper after closing its pipe (the component gets SIGKILL).
const STOP_DEADLINE: Duration = Duration::from_secs(10);

/// How much of a log's end is read for an error message.
const TAIL_BYTES: u64 = 16 * 1024;

/// A running component.
pub struct Process {
    component: Component,
    wrapper: Child,
    /// The write end of the wrapper's stdin: dropping it kills the component.
    lifeline: Option<ChildStdin>,
    pid: u32,
    log: PathBuf,
}

impl Process {
    /// Starts `program` with `args` as `component`, output appended to `log`, its pids handed
    /// to `run`'s reaper.
    pub fn spawn(
        component: Component,
        program: &Path,
        args: &[OsString],
        log: PathBuf,
        run: &RunDir,
    ) -> Result<Process> {
        let mut wrapper = Command::new("sh")
            .arg("-c")
            .arg(WRAPPER_SCRIPT)
            .arg(format!("nmo-envtest-{component}"))
            .arg(&log)
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            // Its own process group: a Ctrl-C meant for the tests reaches the test process,
            // whose end then stops the component in order.
            .process_group(0)
            .spawn()
            .map_err(|source| Error::Spawn {
                what: format!("{component} (under sh)"),
                source,
            })?;
        let lifeline = wrapper.stdin.take();
        let mut line = String::new();
        if let Some(stdout) = wrapper.stdout.take() {
            // The wrapper prints the pid before anything else, or exits (end of file).
            let _ = BufReader::new(stdout).read_line(&mut line);
        }
        let Ok(pid) = line.trim().parse::<u32>() else {
            let _ = wrapper.kill();
            let _ = wrapper.wait();
            return Err(Error::Spawn {
                what: component.to_string(),
                source: std::io::Error::other(format!(
                    "its wrapper did not report a pid (got {line:?})"
                )),
            });
        };
        let process = Process {
            component,
            wrapper,
            lifeline,
            pid,
            log,
        };
        run.watch(&[process.wrapper.id(), pid])?;
        Ok(process)
    }

    /// The component.
    pub fn component(&self) -> Component {
        self.component
    }

    /// The component's pid (not the wrapper's).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The wrapper's pid.
    pub fn wrapper_pid(&self) -> u32 {
        self.wrapper.id()
    }

    /// The component's log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// How the component ended, if it has.
    pub fn exit_status(&mut self) -> Option<String> {
        match self.wrapper.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(error) => Some(format!("unknown: {error}")),
        }
    }

    /// The last `lines` lines of the component's log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }

    /// Whether the log says the component could not listen on its port.
    pub fn lost_a_port_race(&self) -> bool {
        self.log_tail(40).contains("address already in use")
    }

    /// The error for a component that exited while starting.
    pub fn died(&mut self) -> Error {
        Error::ComponentDied {
            component: self.component,
            status: self.exit_status().unwrap_or_else(|| "running".into()),
            log: self.log.clone(),
            tail: self.log_tail(25),
        }
    }

    /// Sends `signal` (a name `kill` knows: `KILL`, `TERM`, `STOP`, `CONT`) to the component
    /// (not to its wrapper).
    pub fn signal(&self, signal: &str) -> Result<()> {
        let sent = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid.to_string())
            .stderr(Stdio::piped())
            .output()
            .map_err(|source| Error::Spawn {
                what: format!("kill -{signal} {}", self.pid),
                source,
            })?;
        if sent.status.success() {
            return Ok(());
        }
        Err(Error::Signal {
            component: self.component,
            signal: signal.to_string(),
            reason: String::from_utf8_lossy(&sent.stderr).trim().to_string(),
        })
    }

    /// Waits up to `deadline` for the component (and so its wrapper) to exit; whether it did.
    pub fn wait_exit(&mut self, deadline: Duration) -> bool {
        let started = Instant::now();
        while self.exit_status().is_none() {
            if started.elapsed() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// Closes the pipe: the wrapper kills the component. Returns at once.
    pub fn close_lifeline(&mut self) {
        drop(self.lifeline.take());
    }

    /// Closes the pipe and waits until the component and its wrapper are gone.
    pub fn stop(&mut self) {
        self.close_lifeline();
        let started = Instant::now();
        while matches!(self.wrapper.try_wait(), Ok(None)) && started.elapsed() < STOP_DEADLINE {
            std::thread::sleep(Duration::from_millis(5));
        }
        if matches!(self.wrapper.try_wait(), Ok(None)) {
            // The wrapper is stuck: kill both directly.
            tracing::warn!(component = %self.component, "the wrapper did not stop: killing it");
            let _ = Command::new("sh")
                .arg("-c")
                .arg("kill -KILL \"$1\" 2>/dev/null")
                .arg("sh")
                .arg(self.pid.to_string())
                .status();
            let _ = self.wrapper.kill();
            let _ = self.wrapper.wait();
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The last `lines` lines of `path` (reading at most its last 16 KiB).
pub fn tail(path: &Path, lines: usize) -> String {
    let Ok(mut file) = std::fs::File::open(path) else {
        return format!("(no log at {})", path.display());
    };
    let length = file.metadata().map(|meta| meta.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(length.saturating_sub(TAIL_BYTES)));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs;

    fn run_dir(name: &str) -> (PathBuf, RunDir) {
        let base = std::env::temp_dir().join(format!("nmo-envtest-{name}-{}", std::process::id()));
        let run = RunDir::create(&base, None).unwrap();
        (base, run)
    }

    #[test]
    fn dropping_kills_the_component_and_its_wrapper() {
        let (base, run) = run_dir("process-drop");
        let log = run.path().join("sleep.log");
        let args: Vec<OsString> = vec!["300".into()];
        let mut process =
            Process::spawn(Component::Etcd, Path::new("sleep"), &args, log, &run).unwrap();
        let (pid, wrapper) = (process.pid(), process.wrapper_pid());
        assert!(procfs::is_alive(pid), "the component runs");
        assert!(process.exit_status().is_none());
        drop(process);
        assert!(!procfs::is_alive(pid), "the component is gone");
        assert!(!procfs::is_alive(wrapper), "the wrapper is gone");
        drop(run);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_component_that_exits_is_reported_with_its_log() {
        let (base, run) = run_dir("process-exit");
        let log = run.path().join("sh.log");
        let args: Vec<OsString> = vec![
            "-c".into(),
            "echo starting; echo 'listen tcp 127.0.0.1:1: bind: address already in use' >&2; exit 3"
                .into(),
        ];
        let mut process =
            Process::spawn(Component::ApiServer, Path::new("sh"), &args, log, &run).unwrap();
        let started = Instant::now();
        while process.exit_status().is_none() {
            assert!(started.elapsed() < Duration::from_secs(10), "it exits");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(process.lost_a_port_race());
        let error = process.died().to_string();
        assert!(
            error.contains("kube-apiserver exited (exit status: 3)"),
            "{error}"
        );
        assert!(error.contains("starting"), "{error}");
        drop(process);
        drop(run);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_missing_program_is_a_component_that_died() {
        let (base, run) = run_dir("process-missing");
        let log = run.path().join("missing.log");
        let mut process = Process::spawn(
            Component::Scheduler,
            Path::new("/no/such/kube-scheduler"),
            &[],
            log,
            &run,
        )
        .unwrap();
        let started = Instant::now();
        while process.exit_status().is_none() {
            assert!(started.elapsed() < Duration::from_secs(10), "it exits");
            std::thread::sleep(Duration::from_millis(10));
        }
        let error = process.died().to_string();
        assert!(error.contains("/no/such/kube-scheduler"), "{error}");
        drop(process);
        drop(run);
        std::fs::remove_dir_all(&base).unwrap();
    }
}

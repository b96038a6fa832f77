//! Nothing outlives a control plane: not when it is dropped, not when its test process
//! panics with it in a static, not when that process is killed with SIGKILL. The last two
//! run this very binary as a child ("victim") that starts a control plane, reports its pids
//! and directory on stdout, and then panics or waits to be killed.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nmo_envtest::{Component, ControlPlane, Options, is_alive};

use crate::support::scratch_dir;

/// Set in a child: which victim to play.
const VICTIM_VAR: &str = "NMO_ENVTEST_VICTIM";
/// The line a victim prints once its control plane runs.
const READY_LINE: &str = "VICTIM-READY";

fn wait_until_gone(pids: &[u32], dir: &Path) {
    let began = Instant::now();
    loop {
        let alive = alive(pids);
        if alive.is_empty() && !dir.exists() {
            return;
        }
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "30 s after the end: processes {alive:?} alive, {} exists: {}",
            dir.display(),
            dir.exists()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The pid of a child that has already exited.
fn exited_pid() -> u32 {
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    pid
}

/// Those of `pids` still alive.
fn alive(pids: &[u32]) -> Vec<u32> {
    pids.iter().copied().filter(|pid| is_alive(*pid)).collect()
}

/// Every pid of `control_plane`'s processes: components and their wrappers.
fn all_pids(control_plane: &ControlPlane) -> Vec<u32> {
    control_plane
        .components()
        .iter()
        .flat_map(|component| [component.pid, component.wrapper_pid])
        .collect()
}

#[test]
fn a_dropped_control_plane_leaves_no_process_and_no_directory() {
    let base = scratch_dir("dropped");
    // A run whose owner died without its reaper finishing: removed by the next start.
    let dead_owner = exited_pid();
    let stale = base.join(format!("run-{dead_owner}-1-0"));
    std::fs::create_dir_all(stale.join("etcd")).unwrap();

    let began = Instant::now();
    let control_plane = ControlPlane::start(Options {
        base_dir: Some(base.clone()),
        ..Options::api_only()
    })
    .expect("the control plane starts");
    let wall = began.elapsed();
    assert!(!stale.exists(), "the stale run was not cleaned");

    let dir = control_plane.data_dir().to_path_buf();
    let components = control_plane.components();
    let started: Vec<Component> = components.iter().map(|c| c.component).collect();
    assert_eq!(started, [Component::Etcd, Component::ApiServer]);
    let pids = all_pids(&control_plane);
    assert!(
        pids.iter().all(|pid| is_alive(*pid)),
        "all running: {pids:?}"
    );
    assert!(dir.join("etcd").is_dir() && dir.join("logs/kube-apiserver.log").is_file());
    println!("etcd + kube-apiserver ready in {:.2} s", wall.as_secs_f64());
    for component in &components {
        println!(
            "{}: rss {:.1} MiB",
            component.component,
            component.rss.unwrap_or(0) as f64 / 1048576.0
        );
    }

    let stopping = Instant::now();
    drop(control_plane);
    println!("stopped in {:.2} s", stopping.elapsed().as_secs_f64());
    // Dropping waits: nothing is left at the moment it returns.
    let alive = alive(&pids);
    assert!(alive.is_empty(), "still running after drop: {alive:?}");
    assert!(!dir.exists(), "{} left behind", dir.display());
    std::fs::remove_dir_all(&base).unwrap();
}

/// What a victim reported: its processes and run directory.
struct Victim {
    pids: Vec<u32>,
    dir: PathBuf,
}

/// Runs `test` of this binary as a victim playing `role`; returns its report once it prints
/// it, with the child (still running, or finishing by itself).
fn spawn_victim(test: &str, role: &str) -> (std::process::Child, Victim) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(VICTIM_VAR, role)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the victim starts");
    let stdout = child.stdout.take().unwrap();
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let began = Instant::now();
    loop {
        let line = received
            .recv_timeout(Duration::from_secs(120).saturating_sub(began.elapsed()))
            .unwrap_or_else(|_| {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the victim never reported a running control plane")
            });
        // libtest writes "test <name> ... " without a line end before the test prints.
        if let Some((_, report)) = line.split_once(READY_LINE) {
            let mut pids = Vec::new();
            let mut dir = PathBuf::new();
            for field in report.split_whitespace() {
                if let Some(list) = field.strip_prefix("pids=") {
                    pids = list.split(',').map(|pid| pid.parse().unwrap()).collect();
                } else if let Some(path) = field.strip_prefix("dir=") {
                    dir = PathBuf::from(path);
                }
            }
            assert!(pids.len() >= 4 && dir.is_dir(), "bad report: {line}");
            return (child, Victim { pids, dir });
        }
    }
}

/// The victim's side: a control plane, a report, then `role`'s end.
fn play_victim(role: &str) {
    let control_plane: &ControlPlane = match role {
        // In a static, never dropped: only the end of the process can clean up.
        "panic" => ControlPlane::shared_with(&Options::api_only()).expect("a control plane"),
        // Owned, but the process is killed before anything is dropped.
        _ => Box::leak(Box::new(
            ControlPlane::start(Options::api_only()).expect("a control plane"),
        )),
    };
    let pids: Vec<String> = all_pids(control_plane).iter().map(u32::to_string).collect();
    println!(
        "{READY_LINE} pids={} dir={}",
        pids.join(","),
        control_plane.data_dir().display()
    );
    if role == "panic" {
        panic!("the victim panics with its control plane running");
    }
    loop {
        std::thread::sleep(Duration::from_secs(60));
    }
}

/// In a victim (this binary run by `spawn_victim`): plays its role, then None. Otherwise
/// `spawn_victim(test, role)`.
fn victim_of(test: &str, role: &str) -> Option<(std::process::Child, Victim)> {
    match std::env::var(VICTIM_VAR) {
        Ok(played) => {
            play_victim(&played);
            None
        }
        Err(_) => Some(spawn_victim(test, role)),
    }
}

#[test]
fn a_test_process_that_panics_leaves_nothing_behind() {
    let test = "cleanup::a_test_process_that_panics_leaves_nothing_behind";
    let Some((mut child, victim)) = victim_of(test, "panic") else {
        return;
    };
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(101),
        "the victim's test failed by panicking"
    );
    wait_until_gone(&victim.pids, &victim.dir);
}

#[test]
fn a_test_process_killed_with_sigkill_leaves_nothing_behind() {
    let test = "cleanup::a_test_process_killed_with_sigkill_leaves_nothing_behind";
    let Some((mut child, victim)) = victim_of(test, "kill") else {
        return;
    };
    assert!(victim.pids.iter().all(|pid| is_alive(*pid)));
    child.kill().unwrap(); // SIGKILL: no destructor, no handler runs
    child.wait().unwrap();
    wait_until_gone(&victim.pids, &victim.dir);
}

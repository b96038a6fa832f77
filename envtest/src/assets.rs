//! Where the binaries come from: `KUBEBUILDER_ASSETS` (controller-runtime's envtest convention),
//! or else the repository's `assets` script, which lays them out and prints the directory.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::component::Component;
use crate::error::{Error, Result};

/// The variable naming the directory of the binaries.
pub const ASSETS_VAR: &str = "KUBEBUILDER_ASSETS";

/// The script's place relative to the workspace (a sibling `shared/` of the checkout, as on the
/// development machines) and its fixed place on those machines.
const SCRIPT_FROM_WORKSPACE: &str = "../shared/k8s/assets";
const SCRIPT_FIXED: &str = "/work/shared/k8s/assets";

/// The script may install etcd with apt on a fresh machine: minutes, not hours.
const SCRIPT_DEADLINE: Duration = Duration::from_secs(600);

/// The directory the script printed, so that it runs once per process.
static FROM_SCRIPT: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The directory of the binaries: `explicit` if given, else `KUBEBUILDER_ASSETS`, else what
/// the `assets` script prints (run once per process).
pub fn assets_dir(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(dir) = explicit {
        return Ok(dir.to_path_buf());
    }
    if let Some(dir) = std::env::var_os(ASSETS_VAR).filter(|dir| !dir.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    // Held while the script runs: concurrent first starts wait for one run.
    let mut cached = FROM_SCRIPT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(dir) = cached.as_ref() {
        return Ok(dir.clone());
    }
    let dir = run_script()?;
    *cached = Some(dir.clone());
    Ok(dir)
}

/// The assets scripts that may exist, best first.
pub fn script_candidates() -> Vec<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    vec![
        workspace.join(SCRIPT_FROM_WORKSPACE),
        PathBuf::from(SCRIPT_FIXED),
    ]
}

fn run_script() -> Result<PathBuf> {
    let candidates = script_candidates();
    let Some(script) = candidates.iter().find(|path| path.is_file()) else {
        let looked_at = candidates
            .iter()
            .map(|path| path.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        return Err(Error::NoAssets { looked_at });
    };
    tracing::info!(script = %script.display(), "KUBEBUILDER_ASSETS is unset: running the assets script");
    let mut child = Command::new(script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| Error::Spawn {
            what: script.display().to_string(),
            source,
        })?;
    // Read both pipes while waiting, or a chatty apt-get could fill one and block the script.
    let stdout = child.stdout.take().map(drain);
    let stderr = child.stderr.take().map(drain);
    let started = Instant::now();
    // `Err`: how it ended if not with success.
    let outcome: Result<(), String> = loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break Ok(()),
            Ok(Some(status)) => break Err(status.to_string()),
            Ok(None) if started.elapsed() > SCRIPT_DEADLINE => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!("killed after {SCRIPT_DEADLINE:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(source) => {
                return Err(Error::io(
                    format!("waiting for {}", script.display()),
                    source,
                ));
            }
        }
    };
    let stdout = stdout
        .and_then(|reader| reader.join().ok())
        .unwrap_or_default();
    let stderr = stderr
        .and_then(|reader| reader.join().ok())
        .unwrap_or_default();
    // The script prints the directory last.
    let dir = stdout.lines().rev().find(|line| !line.trim().is_empty());
    match (outcome, dir) {
        (Ok(()), Some(dir)) => Ok(PathBuf::from(dir.trim())),
        (outcome, _) => Err(Error::AssetsScript {
            script: script.clone(),
            status: outcome
                .err()
                .unwrap_or_else(|| "succeeded but printed no directory".into()),
            stderr: last_chars(&stderr, 2000),
        }),
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

fn last_chars(text: &str, max: usize) -> String {
    let skip = text.chars().count().saturating_sub(max);
    text.chars().skip(skip).collect()
}

/// The path of `component`'s binary in `dir`, or an error naming what is missing.
pub fn binary(dir: &Path, component: Component) -> Result<PathBuf> {
    let path = dir.join(component.binary());
    let executable = std::fs::metadata(&path)
        .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        .unwrap_or(false);
    if executable {
        Ok(path)
    } else {
        Err(Error::MissingBinary {
            binary: component.binary(),
            dir: dir.to_path_buf(),
        })
    }
}

/// `kubectl` from the assets directory (the script links it there), else from `PATH`.
pub fn kubectl(dir: &Path) -> PathBuf {
    let beside = dir.join("kubectl");
    if beside.is_file() {
        beside
    } else {
        PathBuf::from("kubectl")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_binary_is_named_with_the_way_to_get_it() {
        let dir = std::env::temp_dir().join(format!("nmo-envtest-assets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let error = binary(&dir, Component::ApiServer).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(error.contains("`kube-apiserver` is missing"), "{error}");
        assert!(
            error.contains("KUBEBUILDER_ASSETS=$(../shared/k8s/assets)"),
            "{error}"
        );
    }

    #[test]
    fn a_non_executable_file_is_not_a_binary() {
        let dir = std::env::temp_dir().join(format!("nmo-envtest-exec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("etcd"), "not a program").unwrap();
        let outcome = binary(&dir, Component::Etcd);
        std::fs::set_permissions(dir.join("etcd"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let after_chmod = binary(&dir, Component::Etcd);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(
            outcome,
            Err(Error::MissingBinary { binary: "etcd", .. })
        ));
        assert_eq!(after_chmod.unwrap(), dir.join("etcd"));
    }
}

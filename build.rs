//! Embeds the git commit nmo is built from (`NMO_GIT_COMMIT`), for `nmo --version`, the
//! start-up log line and the `nmo_build_info` metric.
//!
//! Taken from the environment variable `NMO_GIT_COMMIT` when set (an image build has no `.git`:
//! pass it as a build argument), else asked of git, else "unknown" (a source tarball, a build
//! without git installed). Never fails the build.

use std::path::PathBuf;
use std::process::Command;

const UNKNOWN: &str = "unknown";

fn main() {
    // Without these, cargo would rerun the script after any change in the package.
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=NMO_GIT_COMMIT");
    let commit = match std::env::var("NMO_GIT_COMMIT") {
        Ok(commit) if !commit.trim().is_empty() => commit.trim().to_string(),
        _ => {
            watch_git_head();
            git(&["rev-parse", "HEAD"]).unwrap_or_else(|| UNKNOWN.to_string())
        }
    };
    println!("cargo:rustc-env=NMO_GIT_COMMIT={commit}");
}

/// `git <args>`'s first line of output, if git runs and succeeds.
fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    let line = text.lines().next()?.trim().to_string();
    (!line.is_empty()).then_some(line)
}

/// Rebuilds when HEAD moves: HEAD itself (a checkout), the branch it points to (a commit) and
/// packed-refs (a branch packed by git gc). Worktrees keep HEAD apart from the shared refs,
/// which `git rev-parse --git-path` resolves.
fn watch_git_head() {
    let mut paths = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        paths.push(branch);
    }
    for path in paths {
        if let Some(resolved) = git(&["rev-parse", "--git-path", &path]) {
            let resolved = PathBuf::from(resolved);
            if resolved.exists() {
                println!("cargo:rerun-if-changed={}", resolved.display());
            }
        }
    }
}

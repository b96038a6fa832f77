//! What the packaging tests share: the repository's paths, `kubectl kustomize`, YAML documents,
//! and generated files checked for drift (or rewritten with NMO_REGENERATE=1).

use crate::support::assert_success;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Output};

use nmo_envtest::{ControlPlane, Identity};

use serde::Deserialize;
use serde_json::Value;

/// Set to 1 to rewrite the generated files (install.yaml, bundle/manifests) instead of failing
/// on drift.
pub const REGENERATE: &str = "NMO_REGENERATE";

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn regenerating() -> bool {
    std::env::var(REGENERATE).as_deref() == Ok("1")
}

/// The YAML documents of a text (empty ones dropped).
pub fn documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).expect("valid YAML"))
        .filter(|doc| !doc.is_null())
        .collect()
}

/// `kubectl kustomize <dir>`'s output. kubectl is on every machine of the project (.ci/run
/// installs it where it is missing): without it these tests fail rather than pass unchecked.
pub fn kustomize_text(dir: &Path) -> String {
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("kubectl is needed to build the kustomizations (.ci/run installs it): {e}")
        });
    assert_success(
        &output,
        format!("kubectl kustomize {} failed", dir.display()),
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

/// The objects `kubectl kustomize <dir>` builds.
pub fn kustomize(dir: &Path) -> Vec<Value> {
    documents(&kustomize_text(dir))
}

/// The objects of an entry point of deploy/, e.g. `"install"` ("" for deploy/ itself).
pub fn build(entry_point: &str) -> Vec<Value> {
    kustomize(&repo().join("deploy").join(entry_point))
}

/// Builds a throwaway kustomization (as a user's own would be) with these resources and
/// components, given relative to the repository root.
pub fn build_overlay(resources: &[&str], components: &[&str]) -> Vec<Value> {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a temporary directory");
    // kustomize takes only relative paths.
    let up = relative_to_repo(dir.path());
    let list = |paths: &[&str]| -> String {
        use std::fmt::Write as _;
        paths.iter().fold(String::new(), |mut out, p| {
            let _ = writeln!(out, "  - {}", up.join(p).display());
            out
        })
    };
    let text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n{}components:\n{}",
        list(resources),
        list(components)
    );
    std::fs::write(dir.path().join("kustomization.yaml"), text).expect("writable");
    kustomize(dir.path())
}

/// The relative path from `dir` to the repository root (`../../..` when `dir` is inside it, as
/// target/ usually is; up to their common ancestor and down again otherwise).
pub fn relative_to_repo(dir: &Path) -> PathBuf {
    let dir = dir.canonicalize().expect("the directory exists");
    let root = repo().canonicalize().expect("the repository exists");
    let common = dir
        .components()
        .zip(root.components())
        .take_while(|(a, b)| a == b)
        .count();
    let up = dir
        .components()
        .skip(common)
        .filter(|c| matches!(c, Component::Normal(_)))
        .map(|_| Component::ParentDir);
    up.chain(root.components().skip(common)).collect()
}

pub fn kind_of(object: &Value) -> (&str, &str) {
    (
        object["kind"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default(),
    )
}

/// The one object of this kind and name.
pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = objects
        .iter()
        .filter(|o| kind_of(o) == (kind, name))
        .collect();
    assert_eq!(found.len(), 1, "expected one {kind} {name}");
    found[0]
}

pub fn find_all<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// Compares a generated file with the one on disk by content (YAML documents, so that a
/// formatting difference between kubectl versions is no drift), or rewrites it.
pub fn check_generated(relative: &str, generated: &str, how: &str) {
    let path = repo().join(relative);
    if regenerating() {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("writable");
        }
        std::fs::write(&path, generated).expect("writable");
        return;
    }
    let on_disk = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{relative} is missing ({e}): {how}"));
    assert!(
        documents(&on_disk) == documents(generated),
        "{relative} differs from what deploy/ builds: {how}"
    );
}

#[test]
fn the_path_back_to_the_repository_works_from_anywhere() {
    let outside = tempfile::tempdir().expect("a directory");
    let inside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a directory");
    for dir in [outside.path(), inside.path()] {
        let back = relative_to_repo(dir);
        assert!(back.is_relative(), "{}", back.display());
        assert_eq!(
            dir.join(&back).canonicalize().expect("exists"),
            repo().canonicalize().expect("exists")
        );
    }
}

/// kubectl as the admin of a control plane, run from the repository (its paths are relative
/// to it).
pub struct Kubectl<'a>(pub &'a ControlPlane);

impl Kubectl<'_> {
    /// Runs `kubectl args`.
    pub fn run(&self, args: &[&str]) -> Output {
        self.0
            .kubectl(&Identity::admin())
            .expect("kubectl for the admin")
            .current_dir(repo())
            .args(args)
            .output()
            .expect("kubectl runs")
    }

    /// Runs `kubectl args`, failing the test with kubectl's words if it fails.
    pub fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert_success(&output, format!("kubectl {} failed", args.join(" ")));
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Whether `kubectl get what` finds it (`what`: `kind/name`, then flags).
    pub fn exists(&self, what: &[&str]) -> bool {
        let mut get = vec!["get"];
        get.extend_from_slice(what);
        self.run(&get).status.success()
    }

    /// Waits until the CRD `crd` (`crd/<name>`) is established.
    pub fn established(&self, crd: &str) {
        self.ok(&["wait", "--for=condition=Established", crd, "--timeout=30s"]);
    }

    /// Waits until each of `what` is gone (the namespace controller finishes namespaces).
    pub fn gone(&self, what: &[&str]) {
        let mut wait = vec!["wait", "--for=delete", "--timeout=60s"];
        wait.extend_from_slice(what);
        self.ok(&wait);
    }
}

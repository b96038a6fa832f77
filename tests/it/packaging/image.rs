//! The image, built without a container engine by `deploy/image/build` (an OCI image layout)
//! and checked with Debian's tools as a registry or a runtime would see it: `skopeo inspect`
//! reads its name, labels and config (non-root user, entry point), `umoci unpack` makes its
//! root file system, and from that root (chroot, as user 65532) `/manager --help` runs and a
//! short start against a real API server becomes ready. Two builds of the same binary, with
//! different file times and output directories, have the same digest.
//!
//! The test builds the image from this test run's own binary (a debug build, stripped by the
//! script): the script and the layout are what is checked here; the release build is the same
//! script with no `--binary` (docs/install.md). skopeo and umoci come from Debian's packages
//! (.ci/run installs them); without them this test fails rather than passes unchecked.

use crate::support::assert_success;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use nmo_envtest::{ControlPlane, Identity, Options};
use serde_json::Value;

use super::support::repo;

/// A fixed commit time, so that both builds agree whatever the checkout.
const EPOCH: &str = "1700000000";

fn run(command: &mut Command) -> Output {
    let output = command.output().unwrap_or_else(|e| {
        panic!("{command:?} cannot run (.ci/run installs skopeo and umoci): {e}")
    });
    assert_success(&output, format!("{command:?} failed"));
    output
}

/// Builds the image from `binary` into `out`: its name and digest.
fn build(binary: &Path, out: &Path) -> (String, String) {
    let output = run(Command::new(repo().join("deploy/image/build"))
        .arg("--binary")
        .arg(binary)
        .arg("--out")
        .arg(out)
        .env("SOURCE_DATE_EPOCH", EPOCH));
    let text = String::from_utf8(output.stdout).expect("UTF-8");
    let lines: Vec<&str> = text.lines().collect();
    let [.., name, digest] = lines[..] else {
        panic!("no name and digest in: {text}");
    };
    (name.to_string(), digest.to_string())
}

/// The image's name as deploy/ and the bundle use it.
fn deployed_image() -> String {
    let objects = super::support::build("");
    let deployment = super::support::find(&objects, "Deployment", "nmo");
    deployment["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .expect("an image")
        .to_string()
}

fn is_root() -> bool {
    let output = run(Command::new("id").arg("-u"));
    String::from_utf8_lossy(&output.stdout).trim() == "0"
}

/// `chroot` into `rootfs` as the image's user (as root), or as a mapped root in a user
/// namespace otherwise.
fn in_image(rootfs: &Path) -> Command {
    if is_root() {
        let mut command = Command::new("chroot");
        command.arg("--userspec=65532:65532").arg(rootfs);
        command
    } else {
        let mut command = Command::new("unshare");
        command.args(["--map-root-user", "chroot"]).arg(rootfs);
        command
    }
}

#[test]
fn the_image_is_reproducible_inspectable_and_runs_from_its_unpacked_root() {
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a directory");
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_nmo"));
    let (name, digest) = build(&binary, &work.path().join("a"));
    assert_eq!(name, deployed_image(), "the image deploy/ runs");
    // The same binary, copied with another time stamp, into another directory.
    let copy = work.path().join("nmo");
    std::fs::copy(&binary, &copy).expect("a copy");
    run(Command::new("touch").args(["-d", "2001-01-01"]).arg(&copy));
    let (_, again) = build(&copy, &work.path().join("b"));
    assert_eq!(digest, again, "two builds of one binary differ");
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );

    let tag = name.rsplit_once(':').expect("a tag").1;
    assert_eq!(tag, env!("CARGO_PKG_VERSION"));
    let reference = format!("oci:{}:{tag}", work.path().join("a").display());
    let inspected: Value =
        serde_json::from_slice(&run(Command::new("skopeo").args(["inspect", &reference])).stdout)
            .expect("JSON");
    assert_eq!(inspected["Digest"], digest.as_str());
    assert_eq!(inspected["Os"], "linux");
    let labels = &inspected["Labels"];
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
    assert_eq!(labels["org.opencontainers.image.version"], tag);
    let config: Value = serde_json::from_slice(
        &run(Command::new("skopeo").args(["inspect", "--config", &reference])).stdout,
    )
    .expect("JSON");
    assert_eq!(config["config"]["User"], "65532:65532");
    assert_eq!(config["config"]["Entrypoint"][0], "/usr/local/bin/nmo");

    let bundle = work.path().join("bundle");
    let mut unpack = Command::new("umoci");
    unpack.arg("unpack");
    if !is_root() {
        unpack.arg("--rootless");
    }
    run(unpack
        .arg("--image")
        .arg(format!("{}:{tag}", work.path().join("a").display()))
        .arg(&bundle));
    let rootfs = bundle.join("rootfs");
    assert_eq!(
        std::fs::read_link(rootfs.join("manager")).expect("/manager is a link"),
        Path::new("/usr/local/bin/nmo")
    );
    let help = run(in_image(&rootfs).args(["/manager", "--help"]));
    assert!(String::from_utf8_lossy(&help.stdout).contains("--leader-elect"));

    starts_against_a_real_api_server(&rootfs);
}

/// The status line of `GET /readyz`, if anything answers.
fn readyz(port: u16) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream
        .write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    answer.lines().next().map(str::to_string)
}

/// `/manager` from the image's root, as the Go operator's Deployment runs it (no subcommand),
/// becomes ready against a real API server (its NodeMaintenance list answered), and stops
/// cleanly on SIGTERM.
fn starts_against_a_real_api_server(rootfs: &Path) {
    let plane = ControlPlane::start(Options::api_only()).expect("a control plane");
    let kubectl = |args: &[&str]| {
        run(plane
            .kubectl(&Identity::admin())
            .expect("kubectl")
            .current_dir(repo())
            .args(args))
    };
    kubectl(&["apply", "-f", "deploy/base/crd.yaml"]);
    // The kubeconfig with its certificates inside, readable from the image's root.
    let flattened = kubectl(&["config", "view", "--raw", "--flatten"]);
    std::fs::write(rootfs.join("tmp/kubeconfig"), &flattened.stdout).expect("writable");
    run(Command::new("chmod")
        .args(["0644"])
        .arg(rootfs.join("tmp/kubeconfig")));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut child = in_image(rootfs)
        .args([
            "/manager",
            "--metrics-bind-address=0",
            &format!("--health-probe-bind-address=127.0.0.1:{port}"),
            "--webhook-port=0",
        ])
        .env("KUBECONFIG", "/tmp/kubeconfig")
        .env("LEASE_NAMESPACE", "medik8s-leases")
        .spawn()
        .expect("nmo starts from the image");
    let deadline = Instant::now() + Duration::from_secs(60);
    let ready = loop {
        if let Some(status) = child.try_wait().expect("waitable") {
            panic!("nmo from the image exited: {status}");
        }
        if readyz(port).is_some_and(|line| line.contains(" 200 ")) {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    run(Command::new("kill").args(["-TERM", &child.id().to_string()]));
    let status = child.wait().expect("nmo stops");
    assert!(ready, "nmo from the image never became ready");
    assert!(status.success(), "nmo from the image stopped with {status}");
}

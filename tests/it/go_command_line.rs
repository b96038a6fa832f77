//! nmo started exactly as the Go operator's own manifests start it, as a process of its own
//! (the binary, no subcommand) against the simulated cluster through a kubeconfig, with nmo's
//! RBAC (deploy/base/rbac.yaml) enforced.
//!
//! The arguments are quoted from medik8s/node-maintenance-operator: its Deployment
//! (config/manager/manager.yaml) and its ClusterServiceVersion
//! (bundle/manifests/node-maintenance-operator.clusterserviceversion.yaml, the same as
//! config/default/manager_ports_patch.yaml). Both run `command: [/manager]`; the webhook's
//! certificate is where controller-runtime looks for it outside OLM
//! (`$TMPDIR/k8s-webhook-server/serving-certs`, what config/default/manager_webhook_patch.yaml
//! mounts).
//!
//! The processes bind the fixed ports those arguments name (8443, 8081, 9443): no other
//! test binds them.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;

use crate::obs_support::{http_get, https_get};
use crate::support::{OPERATOR_NAMESPACE, TestEnv, eventually};

/// config/manager/manager.yaml: `command: [/manager]`, `args: [--leader-elect]`.
const DEPLOYMENT_ARGS: &[&str] = &["--leader-elect"];

/// The CSV's `install.spec.deployments[0]...containers[0].args` (`command: [/manager]`).
const CSV_ARGS: &[&str] = &[
    "--health-probe-bind-address=:8081",
    "--metrics-bind-address=:8443",
    "--leader-elect",
    "--enable-http2=false",
];

/// The pod name the process runs as (HOSTNAME in a pod).
const POD: &str = "node-maintenance-operator-controller-manager-7d9f8";

/// How long the process may take to lead, drain, or stop.
const PROCESS_TIMEOUT: Duration = Duration::from_secs(30);

/// A child process, killed if the test ends before it does.
struct Process(Option<Child>);

impl Process {
    fn pid(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }

    /// Whether it has exited (and with what), without waiting.
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.0
            .as_mut()
            .and_then(|child| child.try_wait().expect("try_wait"))
    }

    /// SIGTERM, as the kubelet stops a container; waits for the exit and returns the status
    /// and everything the process wrote on standard output.
    async fn terminate(mut self) -> (std::process::ExitStatus, String) {
        let pid = self.pid().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "SIGTERM sent");
        let mut child = self.0.take().expect("running");
        let waited = tokio::time::timeout(
            PROCESS_TIMEOUT,
            tokio::task::spawn_blocking(move || {
                let status = child.wait().expect("wait");
                let mut out = String::new();
                if let Some(mut stdout) = child.stdout.take() {
                    stdout.read_to_string(&mut out).expect("stdout is UTF-8");
                }
                (status, out)
            }),
        )
        .await;
        waited
            .expect("nmo stops within 30 s of SIGTERM")
            .expect("the wait task")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A directory laid out as controller-runtime expects the webhook's certificate, as TMPDIR.
fn controller_runtime_tmpdir() -> tempfile::TempDir {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a temporary directory");
    let certs = tmp.path().join("k8s-webhook-server/serving-certs");
    std::fs::create_dir_all(&certs).expect("the certificate directory");
    let serving = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
        .expect("a self-signed certificate");
    std::fs::write(certs.join("tls.crt"), serving.cert.pem()).expect("tls.crt");
    std::fs::write(certs.join("tls.key"), serving.signing_key.serialize_pem()).expect("tls.key");
    tmp
}

/// `/manager <args>`: nmo's binary with exactly `args`, as a pod named [`POD`] would run it.
fn start_manager(kubeconfig: &Path, tmpdir: &Path, args: &[&str]) -> Process {
    let child = Command::new(env!("CARGO_BIN_EXE_nmo"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("KUBECONFIG", kubeconfig)
        .env("TMPDIR", tmpdir)
        .env("HOSTNAME", POD)
        // As the CSV sets it (nmo does not need it).
        .env("OPERATOR_NAMESPACE", OPERATOR_NAMESPACE)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("nmo starts");
    Process(Some(child))
}

async fn leader(env: &TestEnv) -> Option<String> {
    env.get_json::<Lease>(Some(OPERATOR_NAMESPACE), nmo::leader::LEADER_ELECTION_ID)
        .await
        .and_then(|lease| lease["spec"]["holderIdentity"].as_str().map(str::to_string))
        .filter(|holder| !holder.is_empty())
}

fn local(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Runs `/manager <args>` to a drained node and a clean stop; `metrics_port` is where `args`
/// put the metrics.
async fn runs_as_the_go_operator_is_run(args: &[&str], metrics_port: u16, nm: &str, node: &str) {
    let env = TestEnv::builder()
        .nodes(2, 3)
        .deployed_rbac()
        .namespace(OPERATOR_NAMESPACE)
        .start_idle()
        .await;
    let files = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a directory");
    let kubeconfig = files.path().join("kubeconfig");
    env.write_operator_kubeconfig(&kubeconfig);
    let tmpdir = controller_runtime_tmpdir();
    let mut process = start_manager(&kubeconfig, tmpdir.path(), args);

    eventually("nmo to lead", PROCESS_TIMEOUT, async || {
        assert!(process.exited().is_none(), "nmo exited with {args:?}");
        leader(&env)
            .await
            .is_some_and(|holder| holder.starts_with(POD))
    })
    .await;
    env.create_maintenance(nm, node).await;
    env.wait_succeeded(nm).await;

    let (ready, _) = http_get(local(8081), "/readyz").await;
    assert_eq!(ready, 200, "/readyz on 8081");
    // Secure, as controller-runtime serves them: HTTPS, and no scrape without a token (the
    // simulator reviews no tokens; tests/it/metrics_auth.rs has the real API server's verdicts).
    let (status, body) = https_get(local(metrics_port), None, None).await;
    assert_eq!(status, 401, "/metrics over HTTPS on {metrics_port}: {body}");
    // The webhook listens on controller-runtime's port with the certificate from $TMPDIR.
    assert!(
        TcpStream::connect_timeout(&local(9443), Duration::from_secs(2)).is_ok(),
        "the webhook listens on 9443"
    );

    let (status, output) = process.terminate().await;
    assert!(status.success(), "{status}: {output}");
    assert_eq!(leader(&env).await, None, "the lease is released on SIGTERM");
    assert!(
        !output.contains('\x1b'),
        "no colour codes in a log that is not a terminal:\n{output}"
    );
    let start = output
        .lines()
        .find(|line| line.contains("nmo starting"))
        .unwrap_or_else(|| panic!("no start-up line:\n{output}"));
    for expected in [
        format!("version=\"{}\"", nmo::build_info::VERSION),
        format!("commit=\"{}\"", nmo::build_info::COMMIT),
        "leader_elect: true".to_string(),
        "metrics_secure: true".to_string(),
        "enable_http2: false".to_string(),
        format!("metrics_bind_address: \":{metrics_port}\""),
    ] {
        assert!(start.contains(&expected), "{expected} not in {start}");
    }
}

// One test for both: they bind the same fixed ports, so they run one after the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_go_operator_s_deployment_and_csv_arguments_run_nmo() {
    runs_as_the_go_operator_is_run(DEPLOYMENT_ARGS, 8443, "nm-deployment", "node-0").await;
    runs_as_the_go_operator_is_run(CSV_ARGS, 8443, "nm-csv", "node-1").await;
}

//! `/healthz` answers as soon as the server runs; `/readyz` only once the replica is ready; both
//! say why; and no client can hold the probes' connections for ever or keep the probes from
//! answering.

use std::net::SocketAddr;
use std::time::Duration;

use nmo::cluster::watch_health::WatchHealth;
use nmo::observability::endpoints::probes_router;
use nmo::observability::health::{Liveness, Readiness};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::obs_support::http_get;

#[tokio::test]
async fn readyz_fails_until_ready_and_healthz_always_answers() {
    let readiness = Readiness::default();
    let watches = WatchHealth::default();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(nmo::observability::http::serve(
        listener,
        probes_router(readiness.clone(), Liveness::default()),
        false,
        async {
            let _ = stopped.await;
        },
    ));

    let (status, body) = http_get(address, "/healthz").await;
    assert_eq!(
        (status, body.as_str()),
        (200, "ok: no supervisor runs on this replica")
    );
    assert_eq!(
        http_get(address, "/readyz").await,
        (503, "not ready: starting".to_string())
    );
    readiness.leading(watches.clone());
    let _nodes = watches.register("Nodes");
    assert_eq!(
        http_get(address, "/readyz").await,
        (
            503,
            "not ready: the NodeMaintenance watch has not listed yet".to_string()
        )
    );
    readiness.listed();
    assert_eq!(
        http_get(address, "/readyz").await,
        (200, "ok: leading, 0 of 1 watches established".to_string())
    );
    assert_eq!(http_get(address, "/healthz").await.0, 200);
    assert_eq!(http_get(address, "/nope").await.0, 404);

    let _ = stop.send(());
    server.await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// A client in the cluster cannot wedge the probes (or hold their connections for ever).

/// The probes server on a loopback port until the returned sender is dropped or fired.
async fn probes_server() -> (
    SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let readiness = Readiness::default();
    readiness.standing_by();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(nmo::observability::http::serve(
        listener,
        probes_router(readiness, Liveness::default()),
        false,
        async {
            let _ = stopped.await;
        },
    ));
    (address, stop, server)
}

/// Whether the server closed `stream` (end of file or reset) within a minute of (paused) time.
async fn closed_by_the_server(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match tokio::time::timeout(Duration::from_secs(60), stream.read(&mut byte)).await {
        Ok(Ok(0) | Err(_)) => true,
        Ok(Ok(_)) => panic!("the server sent something unasked"),
        Err(_) => false,
    }
}

#[tokio::test(start_paused = true)]
async fn a_connection_that_never_sends_a_request_is_closed() {
    let (address, stop, server) = probes_server().await;
    let mut idle = TcpStream::connect(address).await.unwrap();
    assert!(
        closed_by_the_server(&mut idle).await,
        "an idle connection is held for ever"
    );
    let _ = stop.send(());
    server.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_client_trickling_its_request_headers_is_cut_off() {
    let (address, stop, server) = probes_server().await;
    let mut trickle = TcpStream::connect(address).await.unwrap();
    trickle
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: nmo\r\n")
        .await
        .unwrap();
    let mut cut_off = false;
    for n in 0..60 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if trickle
            .write_all(format!("X-Slow-{n}: y\r\n").as_bytes())
            .await
            .is_err()
        {
            cut_off = true;
            break;
        }
        let mut byte = [0u8; 1];
        if let Ok(read) =
            tokio::time::timeout(Duration::from_millis(1), trickle.read(&mut byte)).await
        {
            // End of file, a reset, or the server's 408: the connection is over either way.
            let _ = read;
            cut_off = true;
            break;
        }
    }
    assert!(
        cut_off,
        "a header a second keeps the connection for a minute"
    );
    let _ = stop.send(());
    server.await.unwrap();
}

/// Many more idle and trickling connections than the server takes; probes sent while they are
/// held are answered at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_answer_while_a_client_holds_many_idle_and_trickling_connections() {
    let (address, stop, server) = probes_server().await;
    let mut held = Vec::new();
    for n in 0..200 {
        let mut stream = TcpStream::connect(address).await.unwrap();
        if n % 4 == 0 {
            stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHo")
                .await
                .unwrap();
        }
        held.push(stream);
    }
    for _ in 0..10 {
        let answered = tokio::time::timeout(Duration::from_secs(2), http_get(address, "/healthz"))
            .await
            .expect("a probe is answered while connections are held");
        assert_eq!(
            answered,
            (200, "ok: no supervisor runs on this replica".to_string())
        );
    }
    drop(held);
    let _ = stop.send(());
    server.await.unwrap();
}

/// A child process, killed when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// nmo as a process with few file descriptors (`ulimit -n 128`) against the simulated cluster.
/// A client opens more connections to its probe port than it has descriptors: a server that
/// accepts them all runs out, and then accepts nothing, the kubelet's probes included (the
/// kubelet would restart a healthy nmo, again and again). With a cap, the probes answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_answer_when_a_client_opens_more_connections_than_nmo_has_descriptors() {
    let env = crate::support::TestEnv::builder()
        .scenario(nmo_sim::Scenario::plain(1, 1).pdb(None))
        .start_idle()
        .await;
    let files = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let kubeconfig = files.path().join("kubeconfig");
    env.write_operator_kubeconfig(&kubeconfig);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let _nmo = Child(
        std::process::Command::new("sh")
            .arg("-c")
            .arg("ulimit -n 128 && exec \"$0\" \"$@\"")
            .arg(env!("CARGO_BIN_EXE_nmo"))
            .args([
                "run",
                "--metrics-bind-address=0",
                "--webhook-port=0",
                &format!("--health-probe-bind-address={address}"),
            ])
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "error")
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("nmo starts"),
    );
    crate::support::eventually(
        "nmo to serve its probes",
        Duration::from_secs(30),
        async || {
            let Ok(Ok(mut stream)) =
                tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(address)).await
            else {
                return false;
            };
            let request = "GET /healthz HTTP/1.1\r\nHost: nmo\r\nConnection: close\r\n\r\n";
            let mut answer = String::new();
            stream.write_all(request.as_bytes()).await.is_ok()
                && tokio::time::timeout(Duration::from_secs(1), stream.read_to_string(&mut answer))
                    .await
                    .is_ok()
                && answer.starts_with("HTTP/1.1 200")
        },
    )
    .await;

    let mut held = Vec::new();
    for _ in 0..300 {
        // A server that stopped accepting leaves new connections hanging in the backlog.
        match tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(address)).await {
            Ok(Ok(stream)) => held.push(stream),
            _ => break,
        }
    }
    // Give the server time to take them in (and, without a cap, to run out).
    tokio::time::sleep(Duration::from_millis(500)).await;
    for _ in 0..5 {
        let answered = tokio::time::timeout(Duration::from_secs(3), http_get(address, "/healthz"))
            .await
            .expect("the probe is answered while a client holds 300 connections");
        assert_eq!(answered.0, 200);
    }
    drop(held);
}

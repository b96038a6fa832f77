use std::time::Duration;

use axum::routing::get;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;

fn limits(max_connections: usize) -> Limits {
    Limits {
        max_connections,
        ..Limits::probes(false)
    }
}

async fn server(limits: Limits) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let address = listener.local_addr().expect("bound");
    let router = Router::new().route("/", get(|| async { "ok" }));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve(listener, None, router, limits, async {
        let _ = stopped.await;
    }));
    (address, stop)
}

async fn get_root(stream: &mut TcpStream) -> String {
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: nmo\r\nConnection: close\r\n\r\n")
        .await
        .expect("sent");
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut answer))
        .await
        .expect("answered in time")
        .expect("read");
    answer
}

async fn is_closed(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(Duration::from_secs(2), stream.read(&mut byte)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn at_the_cap_a_new_connection_replaces_the_oldest_idle_one() {
    let (address, _stop) = server(limits(2)).await;
    let mut oldest = TcpStream::connect(address).await.expect("connects");
    let mut second = TcpStream::connect(address).await.expect("connects");
    // The server has taken both in before the third arrives.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut newest = TcpStream::connect(address).await.expect("connects");
    assert!(get_root(&mut newest).await.starts_with("HTTP/1.1 200"));
    assert!(
        is_closed(&mut oldest).await,
        "the oldest idle one made room"
    );
    // The second still works.
    assert!(get_root(&mut second).await.starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn keep_alive_connections_serve_request_after_request() {
    let (address, _stop) = server(limits(4)).await;
    let mut stream = TcpStream::connect(address).await.expect("connects");
    for _ in 0..3 {
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: nmo\r\n\r\n")
            .await
            .expect("sent");
        let mut buffer = [0u8; 256];
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer))
            .await
            .expect("answered")
            .expect("read");
        let answer = String::from_utf8_lossy(&buffer[..read]);
        assert!(
            answer.starts_with("HTTP/1.1 200") && answer.ends_with("ok"),
            "{answer}"
        );
    }
}

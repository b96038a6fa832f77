//! Serving an axum router over plain TCP with HTTP/2 off unless asked for (`--enable-http2`),
//! as the Go operator does: HTTP/2's stream handling has had denial-of-service flaws (rapid
//! reset), and Prometheus and kubelet probes speak HTTP/1.1 anyway.

use std::future::Future;
use std::net::SocketAddr;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// Parses a Go-style bind address: `:8080` means every interface, `host:port` as usual.
pub fn parse_bind_address(address: &str) -> Result<SocketAddr, std::net::AddrParseError> {
    if let Some(port) = address.strip_prefix(':') {
        format!("0.0.0.0:{port}").parse()
    } else {
        address.parse()
    }
}

/// Serves `router` on `listener` until `shutdown` completes; connections in progress are
/// dropped then (probes and scrapes are short).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    enable_http2: bool,
    shutdown: impl Future<Output = ()>,
) {
    let mut builder = Builder::new(TokioExecutor::new());
    if !enable_http2 {
        builder = builder.http1_only();
    }
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            Err(error) => {
                tracing::warn!(%error, "accepting a connection failed");
                continue;
            }
        };
        let service = TowerToHyperService::new(router.clone());
        let builder = builder.clone();
        tokio::spawn(async move {
            if let Err(error) = builder
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_style_addresses_bind_every_interface() {
        assert_eq!(
            parse_bind_address(":8080").map(|a| a.to_string()),
            Ok("0.0.0.0:8080".to_string())
        );
        assert_eq!(parse_bind_address("127.0.0.1:9").map(|a| a.port()), Ok(9));
        assert!(parse_bind_address("nonsense").is_err());
    }
}

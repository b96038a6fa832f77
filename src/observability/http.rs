//! Go-style bind addresses (`:8080`, `host:port`), and the plain-HTTP server of the probes
//! (`crate::serving` takes its connections).

use std::future::Future;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use axum::Router;
use tokio::net::TcpListener;

use crate::serving::{self, Limits};

/// The addresses to try, in order, for a Go-style bind address: `:8080` means every interface,
/// IPv6 and IPv4 (`[::]`, the webhook's choice too) or IPv4 alone on a host without IPv6;
/// `host:port` means just that.
pub fn parse_bind_address(address: &str) -> Result<Vec<SocketAddr>, BindAddressError> {
    let invalid = || BindAddressError(address.to_string());
    if let Some(port) = address.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| invalid())?;
        Ok(vec![
            SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)),
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)),
        ])
    } else {
        Ok(vec![address.parse().map_err(|_| invalid())?])
    }
}

/// A bind address that is neither `:port` nor `host:port`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a bind address (`:port` or `host:port`)")]
pub struct BindAddressError(String);

/// Binds the first of `addresses` that can be bound; the last error otherwise.
pub async fn bind_first(addresses: &[SocketAddr]) -> std::io::Result<TcpListener> {
    let mut last = std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address to bind");
    for address in addresses {
        match TcpListener::bind(address).await {
            Ok(listener) => return Ok(listener),
            Err(error) => last = error,
        }
    }
    Err(last)
}

/// Serves `router` on `listener` with the probes' limits ([`Limits::probes`]: a few
/// connections, short timeouts) until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    enable_http2: bool,
    shutdown: impl Future<Output = ()>,
) {
    serving::serve(
        listener,
        None,
        router,
        Limits::probes(enable_http2),
        shutdown,
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_style_addresses_bind_every_interface_dual_stack_first() {
        assert_eq!(
            parse_bind_address(":8080").map(|a| a.iter().map(ToString::to_string).collect()),
            Ok(vec!["[::]:8080".to_string(), "0.0.0.0:8080".to_string()])
        );
        assert_eq!(
            parse_bind_address("127.0.0.1:9").map(|a| a.iter().map(SocketAddr::port).collect()),
            Ok(vec![9])
        );
        assert!(parse_bind_address("nonsense").is_err());
        assert!(parse_bind_address(":http").is_err());
    }

    #[tokio::test]
    async fn every_interface_is_served_on_ipv6_and_ipv4() {
        let listener = bind_first(&parse_bind_address(":0").expect("valid"))
            .await
            .expect("binds");
        let port = listener.local_addr().expect("bound").port();
        let router = Router::new().route("/", axum::routing::get(|| async { "ok" }));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, router, false, async {
            let _ = stopped.await;
        }));
        for host in ["127.0.0.1", "[::1]"] {
            let Ok(stream) = tokio::net::TcpStream::connect(format!("{host}:{port}")).await else {
                // A host without IPv6 has only the IPv4 fallback.
                assert_eq!(host, "[::1]", "IPv4 must always be served");
                continue;
            };
            drop(stream);
        }
        let _ = stop.send(());
        server.await.expect("stops");
    }
}

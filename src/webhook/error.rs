//! Why the webhook cannot start.

use std::net::SocketAddr;

use super::tls::TlsError;

/// Why the webhook cannot start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The serving certificate is missing or unusable.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The listening socket could not be bound.
    #[error("webhook cannot listen on {address}: {source}")]
    Bind {
        /// The address tried.
        address: SocketAddr,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The bound socket's address could not be read.
    #[error("webhook cannot read its listening address: {0}")]
    LocalAddr(#[source] std::io::Error),
}

//! The metrics server's certificate (`--metrics-secure`): the files in `--metrics-cert-path`
//! (`--metrics-cert-name`, `--metrics-cert-key`; reloaded when they change, as the webhook's),
//! or, as controller-runtime does when none is given, a self-signed one made at start-up
//! (Prometheus then scrapes with `insecureSkipVerify`, and the bearer token still decides who
//! reads).

use std::path::PathBuf;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::webhook::tls::{CertFiles, ReloadingCert, TlsError, alpn_protocols};

/// Where the metrics certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricsCert {
    /// A self-signed certificate for `localhost`, made at start-up and kept in memory.
    SelfSigned,
    /// These files.
    Files(CertFiles),
}

/// Why the metrics server has no certificate.
#[derive(Debug, thiserror::Error)]
pub enum MetricsTlsError {
    /// `--metrics-cert-path` has no certificate under `--metrics-cert-name`.
    #[error("no metrics serving certificate {} (set --metrics-cert-path and --metrics-cert-name, or leave them out for a self-signed one)", .0.display())]
    Missing(PathBuf),
    /// The certificate files are unusable.
    #[error("metrics serving certificate: {0}")]
    Files(#[from] TlsError),
    /// The self-signed certificate could not be made.
    #[error("cannot make a self-signed metrics certificate: {0}")]
    SelfSigned(#[from] rcgen::Error),
    /// rustls refused the configuration.
    #[error("cannot build the metrics TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

impl MetricsCert {
    /// The files `dir` holds under these names; self-signed without a directory.
    pub fn from_flags(dir: Option<&PathBuf>, cert_name: &str, key_name: &str) -> Self {
        match dir {
            None => MetricsCert::SelfSigned,
            Some(dir) => MetricsCert::Files(CertFiles {
                cert: dir.join(cert_name),
                key: dir.join(key_name),
            }),
        }
    }
}

/// The rustls configuration of the metrics server: TLS 1.2+, ALPN `http/1.1` (and `h2` when
/// HTTP/2 is enabled), no client certificates (the bearer token authenticates).
pub fn server_config(
    cert: &MetricsCert,
    enable_http2: bool,
) -> Result<ServerConfig, MetricsTlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth();
    let mut config = match cert {
        MetricsCert::SelfSigned => {
            let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])?;
            let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
                generated.signing_key.serialize_der(),
            ));
            let chain = vec![CertificateDer::from(generated.cert.der().to_vec())];
            builder.with_single_cert(chain, key)?
        }
        MetricsCert::Files(files) => {
            if !files.cert.exists() {
                return Err(MetricsTlsError::Missing(files.cert.clone()));
            }
            let resolver = ReloadingCert::new(files.clone(), provider)?;
            builder.with_cert_resolver(Arc::new(resolver))
        }
    };
    config.alpn_protocols = alpn_protocols(enable_http2);
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_directory_the_certificate_is_self_signed() {
        let cert = MetricsCert::from_flags(None, "tls.crt", "tls.key");
        assert_eq!(cert, MetricsCert::SelfSigned);
        let config = server_config(&cert, false).expect("a configuration");
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }

    #[test]
    fn a_directory_without_the_certificate_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().expect("a directory");
        let cert = MetricsCert::from_flags(Some(&dir.path().to_path_buf()), "tls.crt", "tls.key");
        let error = server_config(&cert, false)
            .expect_err("no files")
            .to_string();
        assert!(
            error.contains(&dir.path().join("tls.crt").display().to_string()),
            "{error}"
        );
    }
}

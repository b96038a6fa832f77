//! The serving certificate: found in the certificate directory, loaded with rustls (ring), and
//! reloaded without a restart when its files change on disk (cert-manager rotates the secret,
//! and the kubelet swaps the mounted files under us).

use std::fmt;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tracing::{info, warn};

/// Where OLM mounts the Go operator's serving certificate; the default certificate directory.
pub const DEFAULT_CERT_DIR: &str = "/apiserver.local.config/certificates";

/// Where controller-runtime (the Go operator outside OLM, kubebuilder's manifests) expects the
/// serving certificate, below the temporary directory (`$TMPDIR`, else `/tmp`); tried when the
/// default directory is absent.
pub fn controller_runtime_cert_dir() -> PathBuf {
    std::env::temp_dir()
        .join("k8s-webhook-server")
        .join("serving-certs")
}

/// The directories to look for the certificate in: `cert_dir`, and when that is OLM's default
/// location, controller-runtime's after it, so both operators' manifests work unchanged.
pub fn cert_dirs(cert_dir: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![cert_dir.to_path_buf()];
    if cert_dir == Path::new(DEFAULT_CERT_DIR) {
        dirs.push(controller_runtime_cert_dir());
    }
    dirs
}

/// The certificate and key file names accepted in the certificate directory, in order of
/// preference: OLM's, then those of a cert-manager (kubernetes.io/tls) secret.
pub const CERT_FILE_PAIRS: [(&str, &str); 2] =
    [("apiserver.crt", "apiserver.key"), ("tls.crt", "tls.key")];

/// Why the serving certificate cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate directory holds none of the accepted certificate files.
    #[error("no webhook serving certificate: none of {} exists (set --webhook-cert-dir, or --webhook-port=0 to disable the webhook)", join(.tried))]
    MissingCertificate {
        /// Every certificate path looked for.
        tried: Vec<PathBuf>,
    },
    /// The certificate exists but the key beside it does not.
    #[error("webhook serving key {key} is missing (certificate {cert} exists)")]
    MissingKey {
        /// The certificate found.
        cert: PathBuf,
        /// The key path looked for.
        key: PathBuf,
    },
    /// A certificate or key file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the file system said.
        #[source]
        source: io::Error,
    },
    /// A file is not the PEM it should be.
    #[error("{path} is not a PEM {what}: {source}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What the file should hold.
        what: &'static str,
        /// What the PEM parser said.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// The key does not fit the certificate, or its algorithm is not supported.
    #[error("cannot serve certificate {cert} with key {key}: {source}")]
    Key {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What rustls said.
        #[source]
        source: rustls::Error,
    },
    /// The TLS configuration could not be built (protocol versions unsupported by the provider).
    #[error("cannot build the TLS configuration: {0}")]
    Config(#[source] rustls::Error),
}

fn join(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The certificate and key files in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFiles {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

impl CertFiles {
    /// The first accepted pair present in `dir`.
    pub fn find(dir: &Path) -> Result<Self, TlsError> {
        let mut tried = Vec::new();
        for (cert, key) in CERT_FILE_PAIRS {
            let cert = dir.join(cert);
            let key = dir.join(key);
            if cert.exists() {
                if !key.exists() {
                    return Err(TlsError::MissingKey { cert, key });
                }
                return Ok(Self { cert, key });
            }
            tried.push(cert);
        }
        Err(TlsError::MissingCertificate { tried })
    }

    /// The first accepted pair in the first of `dirs` that has one.
    pub fn find_in(dirs: &[PathBuf]) -> Result<Self, TlsError> {
        let mut tried = Vec::new();
        for dir in dirs {
            match Self::find(dir) {
                Err(TlsError::MissingCertificate { tried: more }) => tried.extend(more),
                found => return found,
            }
        }
        Err(TlsError::MissingCertificate { tried })
    }

    /// Reads and checks both files.
    fn load(&self, provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
        let read = |path: &Path| {
            fs::read(path).map_err(|source| TlsError::Read {
                path: path.to_path_buf(),
                source,
            })
        };
        let cert_pem = read(&self.cert)?;
        let key_pem = read(&self.key)?;
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| TlsError::Pem {
                path: self.cert.clone(),
                what: "certificate chain",
                source,
            })?;
        if chain.is_empty() {
            return Err(TlsError::Pem {
                path: self.cert.clone(),
                what: "certificate chain",
                source: rustls_pki_types::pem::Error::NoItemsFound,
            });
        }
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|source| TlsError::Pem {
            path: self.key.clone(),
            what: "private key",
            source,
        })?;
        CertifiedKey::from_der(chain, key, provider).map_err(|source| TlsError::Key {
            cert: self.cert.clone(),
            key: self.key.clone(),
            source,
        })
    }

    /// What changes when either file is replaced: inode, modification time and size. Metadata
    /// follows symlinks, so the kubelet's atomic `..data` swap of a secret volume shows up too.
    fn stamp(&self) -> io::Result<Stamp> {
        let of = |path: &Path| {
            fs::metadata(path).map(|m| FileStamp {
                inode: m.ino(),
                modified: m.modified().ok(),
                len: m.len(),
            })
        };
        Ok(Stamp {
            cert: of(&self.cert)?,
            key: of(&self.key)?,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    cert: FileStamp,
    key: FileStamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    inode: u64,
    modified: Option<SystemTime>,
    len: u64,
}

/// A [`ResolvesServerCert`] that serves the files' current certificate: on each handshake it
/// compares the files' stamps (two `stat`s, cheap next to a handshake) and reloads on change.
/// A reload that fails (say the certificate is written but not yet its key) keeps serving the
/// previous certificate and is retried when the files change again.
pub struct ReloadingCert {
    files: CertFiles,
    provider: Arc<CryptoProvider>,
    state: Mutex<State>,
}

struct State {
    /// The stamp of the files `current` was loaded from.
    loaded: Stamp,
    /// A stamp whose files failed to load: not retried (nor logged) on every handshake.
    failed: Option<Stamp>,
    /// The files could not be stat'ed at the last handshake (already logged).
    stat_failing: bool,
    current: Arc<CertifiedKey>,
}

impl fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadingCert")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl ReloadingCert {
    /// Loads the certificate now, so that a bad one fails at startup rather than at the first
    /// handshake.
    pub fn new(files: CertFiles, provider: Arc<CryptoProvider>) -> Result<Self, TlsError> {
        let stamp = files.stamp().map_err(|source| TlsError::Read {
            path: files.cert.clone(),
            source,
        })?;
        let current = Arc::new(files.load(&provider)?);
        Ok(Self {
            files,
            provider,
            state: Mutex::new(State {
                loaded: stamp,
                failed: None,
                stat_failing: false,
                current,
            }),
        })
    }

    /// The certificate to serve now, reloaded first if the files changed.
    pub fn current(&self) -> Arc<CertifiedKey> {
        // A panic while holding the lock leaves consistent data (fields are replaced whole).
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let stamp = self.files.stamp();
        if stamp.is_ok() {
            state.stat_failing = false;
        }
        match stamp {
            Ok(stamp) if stamp != state.loaded && state.failed != Some(stamp) => {
                match self.files.load(&self.provider) {
                    Ok(key) => {
                        info!(cert = %self.files.cert.display(), "serving certificate reloaded");
                        state.current = Arc::new(key);
                        state.loaded = stamp;
                        state.failed = None;
                    }
                    Err(error) => {
                        warn!(%error, "serving certificate changed but cannot be loaded; serving the previous one");
                        state.failed = Some(stamp);
                    }
                }
            }
            Ok(_) => {}
            Err(error) => {
                // Mid-rotation the files may briefly vanish: keep serving what we have, and say
                // so once rather than on every handshake.
                if !state.stat_failing {
                    warn!(%error, cert = %self.files.cert.display(), "cannot stat the serving certificate; serving the previous one");
                }
                state.stat_failing = true;
            }
        }
        Arc::clone(&state.current)
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// A serving certificate held in memory and replaced whole by its owner (nmo's own
/// certificate manager, `serving_cert`), for the webhook to serve without any file: every
/// handshake gets the latest one.
#[derive(Clone)]
pub struct SharedCert {
    current: Arc<std::sync::RwLock<Arc<CertifiedKey>>>,
}

impl fmt::Debug for SharedCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedCert").finish_non_exhaustive()
    }
}

impl PartialEq for SharedCert {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.current, &other.current)
    }
}

impl Eq for SharedCert {}

impl SharedCert {
    /// A certificate from its PEM chain (leaf first) and PEM private key.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<Self, TlsError> {
        let key = certified_key_from_pem(cert_pem, key_pem)?;
        Ok(Self {
            current: Arc::new(std::sync::RwLock::new(Arc::new(key))),
        })
    }

    /// Serves this certificate from the next handshake on; a bad one is refused and the
    /// previous one stays.
    pub fn replace_pem(&self, cert_pem: &[u8], key_pem: &[u8]) -> Result<(), TlsError> {
        let key = Arc::new(certified_key_from_pem(cert_pem, key_pem)?);
        // A panic while holding the lock leaves consistent data (the value is replaced whole).
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = key;
        Ok(())
    }

    fn current(&self) -> Arc<CertifiedKey> {
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }
}

impl ResolvesServerCert for SharedCert {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// Where a certificate held in memory is said to come from in errors.
const IN_MEMORY: &str = "(the webhook certificate secret)";

fn certified_key_from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, TlsError> {
    let provider = rustls::crypto::ring::default_provider();
    let path = || PathBuf::from(IN_MEMORY);
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Pem {
            path: path(),
            what: "certificate chain",
            source,
        })?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|source| TlsError::Pem {
        path: path(),
        what: "private key",
        source,
    })?;
    CertifiedKey::from_der(chain, key, &provider).map_err(|source| TlsError::Key {
        cert: path(),
        key: path(),
        source,
    })
}

/// The rustls server configuration: TLS 1.2+, no client certificates (the API server does not
/// send one by default), ALPN `http/1.1`, plus `h2` only when HTTP/2 is enabled (it is off by
/// default, as in the Go operator, because of the HTTP/2 rapid-reset attacks). The certificate
/// is `shared` when given, else looked for in [`cert_dirs`]`(cert_dir)`.
pub fn server_config(
    cert_dir: &Path,
    shared: Option<&SharedCert>,
    enable_http2: bool,
) -> Result<ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let resolver: Arc<dyn ResolvesServerCert> = match shared {
        Some(shared) => Arc::new(shared.clone()),
        None => {
            let files = CertFiles::find_in(&cert_dirs(cert_dir))?;
            Arc::new(ReloadingCert::new(files, Arc::clone(&provider))?)
        }
    };
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = alpn_protocols(enable_http2);
    Ok(config)
}

/// What a server of nmo's offers in ALPN: `http/1.1`, and `h2` first when HTTP/2 is enabled.
pub fn alpn_protocols(enable_http2: bool) -> Vec<Vec<u8>> {
    if enable_http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_runtime_s_directory_is_tried_after_olm_s() {
        assert_eq!(
            cert_dirs(Path::new(DEFAULT_CERT_DIR)),
            [
                PathBuf::from(DEFAULT_CERT_DIR),
                std::env::temp_dir().join("k8s-webhook-server/serving-certs")
            ]
        );
        // A directory given explicitly is the only one.
        assert_eq!(cert_dirs(Path::new("/certs")), [PathBuf::from("/certs")]);

        let olm = tempfile::tempdir().unwrap();
        let runtime = tempfile::tempdir().unwrap();
        let dirs = [olm.path().to_path_buf(), runtime.path().to_path_buf()];
        let error = CertFiles::find_in(&dirs).unwrap_err().to_string();
        for dir in &dirs {
            assert!(
                error.contains(&dir.join("apiserver.crt").display().to_string()),
                "{error}"
            );
            assert!(
                error.contains(&dir.join("tls.crt").display().to_string()),
                "{error}"
            );
        }
        for name in ["tls.crt", "tls.key"] {
            std::fs::write(runtime.path().join(name), "x").unwrap();
        }
        let found = CertFiles::find_in(&dirs).unwrap();
        assert_eq!(found.cert, runtime.path().join("tls.crt"));
        for name in ["apiserver.crt", "apiserver.key"] {
            std::fs::write(olm.path().join(name), "x").unwrap();
        }
        let found = CertFiles::find_in(&dirs).unwrap();
        assert_eq!(found.cert, olm.path().join("apiserver.crt"), "OLM's first");
    }

    #[test]
    fn a_missing_certificate_names_every_path_tried() {
        let dir = tempfile::tempdir().unwrap();
        let error = CertFiles::find(dir.path()).unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, TlsError::MissingCertificate { .. }));
        assert!(
            message.contains(&dir.path().join("apiserver.crt").display().to_string()),
            "{message}"
        );
        assert!(
            message.contains(&dir.path().join("tls.crt").display().to_string()),
            "{message}"
        );
    }

    #[test]
    fn a_certificate_without_its_key_names_the_key() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tls.crt"), "x").unwrap();
        let error = CertFiles::find(dir.path()).unwrap_err();
        assert!(error.to_string().contains("tls.key"), "{error}");
    }

    #[test]
    fn olm_names_are_preferred_over_cert_manager_names() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["apiserver.crt", "apiserver.key", "tls.crt", "tls.key"] {
            std::fs::write(dir.path().join(name), "x").unwrap();
        }
        let files = CertFiles::find(dir.path()).unwrap();
        assert_eq!(files.cert, dir.path().join("apiserver.crt"));
        assert_eq!(files.key, dir.path().join("apiserver.key"));
    }

    #[test]
    fn garbage_is_a_pem_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tls.crt"), "not a certificate").unwrap();
        std::fs::write(dir.path().join("tls.key"), "not a key").unwrap();
        let error = server_config(dir.path(), None, false).unwrap_err();
        assert!(matches!(error, TlsError::Pem { .. }), "{error}");
        assert!(error.to_string().contains("tls.crt"), "{error}");
    }

    /// A self-signed certificate for `localhost` with the given serial, and its key, as PEM.
    fn certificate(serial: u64) -> (rcgen::Certificate, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.serial_number = Some(rcgen::SerialNumber::from(serial));
        (params.self_signed(&key).unwrap(), key.serialize_pem())
    }

    /// Replaces `path` the way the kubelet updates a secret volume: a new file renamed over.
    fn replace(path: &Path, contents: &str) {
        let temp = path.with_extension("tmp");
        std::fs::write(&temp, contents).unwrap();
        std::fs::rename(&temp, path).unwrap();
    }

    #[test]
    fn a_half_written_rotation_keeps_the_old_certificate_until_the_key_arrives() {
        let dir = tempfile::tempdir().unwrap();
        let (cert1, key1) = certificate(1);
        let (cert2, key2) = certificate(2);
        let files = CertFiles {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
        };
        replace(&files.cert, &cert1.pem());
        replace(&files.key, &key1);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let resolver = ReloadingCert::new(files.clone(), provider).unwrap();
        assert_eq!(resolver.current().cert[0], *cert1.der());

        // New certificate, old key: does not load, the old pair keeps being served.
        replace(&files.cert, &cert2.pem());
        assert_eq!(resolver.current().cert[0], *cert1.der());
        assert_eq!(resolver.current().cert[0], *cert1.der());

        // The key follows: the new pair is served.
        replace(&files.key, &key2);
        assert_eq!(resolver.current().cert[0], *cert2.der());

        // Files briefly gone (a volume being swapped): the loaded pair stays.
        std::fs::remove_file(&files.key).unwrap();
        assert_eq!(resolver.current().cert[0], *cert2.der());
    }
}

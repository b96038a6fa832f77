//! nmo's own webhook serving certificate, for clusters with neither cert-manager nor OLM
//! (`--webhook-cert-secret`): a CA and a serving certificate for the webhook Service kept in a
//! Secret of nmo's namespace (cert-manager's key names plus the CA's key), served from memory,
//! renewed well before they expire (`material`), and the CA bundle published in the webhook
//! configuration (`publish`).
//!
//! Every replica runs it: the first to find no Secret creates it (the others get 409 and read
//! it), a renewal is a replace conditional on the Secret's resourceVersion (a replica that
//! loses the race reads the winner's), and each replica re-reads the Secret every minute, so a
//! renewal made by another one is served here within a minute; the old certificate stays
//! valid for months by then.

mod material;
mod publish;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use tracing::{info, warn};

use crate::webhook::{SharedCert, TlsError};
pub use material::{Lifetimes, Material, MaterialError, Verdict};
pub use publish::{FAILURE_POLICY_ANNOTATION, PublishError};

/// What nmo manages, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingCertConfig {
    /// The Secret holding the CA and the serving certificate.
    pub secret: String,
    /// nmo's namespace: the Secret's and the webhook Service's.
    pub namespace: String,
    /// The webhook Service, whose DNS names the certificate carries.
    pub service: String,
    /// The ValidatingWebhookConfiguration whose webhooks for that Service get the CA bundle.
    pub webhook_configuration: String,
    /// How long the certificates live.
    pub lifetimes: Lifetimes,
    /// How often the Secret and the webhook configuration are checked.
    pub check_interval: Duration,
    /// The deadline of each API call.
    pub call_timeout: Duration,
}

impl ServingCertConfig {
    /// The names the serving certificate is for: the Service's, as the API server calls it.
    pub fn dns_names(&self) -> Vec<String> {
        let base = format!("{}.{}.svc", self.service, self.namespace);
        vec![base.clone(), format!("{base}.cluster.local")]
    }
}

/// Why a round of the certificate manager failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum ServingCertError {
    /// An API call failed.
    #[error("webhook certificate secret {namespace}/{name}: {source}")]
    Api {
        /// The Secret's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
    /// An API call got no answer in time.
    #[error("webhook certificate secret: no answer within {0:?}")]
    Timeout(Duration),
    /// The certificates could not be made.
    #[error(transparent)]
    Material(#[from] MaterialError),
    /// The stored certificate cannot be served.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The CA bundle could not be published.
    #[error(transparent)]
    Publish(#[from] PublishError),
}

async fn timed<T>(
    limit: Duration,
    call: impl Future<Output = Result<T, kube::Error>>,
    config: &ServingCertConfig,
) -> Result<T, ServingCertError> {
    match tokio::time::timeout(limit, call).await {
        Ok(result) => result.map_err(|source| ServingCertError::Api {
            namespace: config.namespace.clone(),
            name: config.secret.clone(),
            source,
        }),
        Err(_) => Err(ServingCertError::Timeout(limit)),
    }
}

fn data_of(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    secret
        .data
        .iter()
        .flatten()
        .map(|(key, value)| (key.clone(), value.0.clone()))
        .collect()
}

fn secret_of(config: &ServingCertConfig, material: &Material, rv: Option<String>) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(config.secret.clone()),
            namespace: Some(config.namespace.clone()),
            resource_version: rv,
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/name".to_string(),
                "nmo".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".to_string()),
        data: Some(
            material
                .to_data()
                .into_iter()
                .map(|(k, v)| (k, ByteString(v)))
                .collect(),
        ),
        ..Secret::default()
    }
}

fn is_status(error: &ServingCertError, code: u16) -> bool {
    matches!(error, ServingCertError::Api { source: kube::Error::Api(status), .. } if status.code == code)
}

/// One round: reads the Secret, creates or renews what needs it (a lost race is read back,
/// never forced), and returns the material to serve.
pub async fn reconcile_secret(
    client: &Client,
    config: &ServingCertConfig,
) -> Result<Material, ServingCertError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &config.namespace);
    let limit = config.call_timeout;
    let names = config.dns_names();
    // A race lost to another replica is read again at once: at most a few rounds.
    for _ in 0..3 {
        let stored = timed(limit, api.get_opt(&config.secret), config).await?;
        let material = stored
            .as_ref()
            .and_then(|s| Material::from_data(&data_of(s)));
        let now = SystemTime::now();
        let verdict = material::assess(material.as_ref(), &names, config.lifetimes, now);
        let Some(renewed) =
            material::apply(verdict, material.as_ref(), &names, config.lifetimes, now)?
        else {
            if let Some(material) = material {
                return Ok(material);
            }
            continue;
        };
        let written = match &stored {
            None => {
                let secret = secret_of(config, &renewed, None);
                timed(limit, api.create(&PostParams::default(), &secret), config).await
            }
            Some(old) => {
                let secret = secret_of(config, &renewed, old.resource_version());
                let params = PostParams::default();
                let replace = api.replace(&config.secret, &params, &secret);
                timed(limit, replace, config).await
            }
        };
        match written {
            Ok(_) => {
                info!(secret = %config.secret, ?verdict, "webhook serving certificate written");
                return Ok(renewed);
            }
            // Another replica wrote first: serve what it wrote.
            Err(error) if is_status(&error, 409) => continue,
            Err(error) => return Err(error),
        }
    }
    Err(ServingCertError::Api {
        namespace: config.namespace.clone(),
        name: config.secret.clone(),
        source: kube::Error::Service("the secret kept changing under nmo".into()),
    })
}

/// Waits for a first certificate (retrying with backoff, so that nmo starts as soon as the
/// API server and its RBAC allow) and publishes its CA bundle: the certificate to serve.
pub async fn obtain(client: &Client, config: &ServingCertConfig) -> SharedCert {
    let mut failures = 0;
    loop {
        match round(client, config, None).await {
            Ok(shared) => return shared,
            Err(error) => {
                failures += 1;
                let wait = backoff(failures);
                warn!(%error, retry_in = ?wait, "cannot set up the webhook serving certificate yet");
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// Keeps the certificate and the published CA bundle current until `shutdown`.
pub async fn keep(
    client: Client,
    config: ServingCertConfig,
    shared: SharedCert,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut failures = 0;
    let mut wait = config.check_interval;
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(wait) => {}
        }
        wait = match round(&client, &config, Some(&shared)).await {
            Ok(_) => {
                failures = 0;
                config.check_interval
            }
            Err(error) => {
                failures += 1;
                let wait = backoff(failures).min(config.check_interval);
                warn!(%error, retry_in = ?wait, "cannot renew or publish the webhook serving certificate");
                wait
            }
        };
    }
}

/// Secret, then serving, then CA bundle: the bundle is published only for a certificate that
/// is already served here (a new CA is trusted before anything it signed is served anywhere,
/// since renewals keep the serving certificate of the old CA until their own turn).
async fn round(
    client: &Client,
    config: &ServingCertConfig,
    shared: Option<&SharedCert>,
) -> Result<SharedCert, ServingCertError> {
    let material = reconcile_secret(client, config).await?;
    let served = match shared {
        Some(shared) => {
            shared.replace_pem(material.tls_cert.as_bytes(), material.tls_key.as_bytes())?;
            shared.clone()
        }
        None => SharedCert::from_pem(material.tls_cert.as_bytes(), material.tls_key.as_bytes())?,
    };
    publish::publish(client, config, material.ca_bundle.as_bytes()).await?;
    Ok(served)
}

/// Between half and all of 1 s × 2^(failures-1), at most 30 s.
fn backoff(failures: u32) -> Duration {
    let full = Duration::from_secs(1)
        .saturating_mul(1u32 << failures.saturating_sub(1).min(5))
        .min(Duration::from_secs(30));
    full.mul_f64(rand::random_range(0.5..=1.0))
}

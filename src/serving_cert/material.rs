//! The certificates themselves, without the API server: what the Secret holds, whether it can
//! be served as it is, and making new ones. Pure apart from the clock and key generation that
//! the caller hands in or asks for.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

/// The Secret's keys: cert-manager's layout (`kubernetes.io/tls` plus `ca.crt`) and the CA's key.
pub const CA_CERT: &str = "ca.crt";
/// The key of the newest CA in [`CA_CERT`], the one that signs serving certificates.
pub const CA_KEY: &str = "ca.key";
/// The serving certificate (PEM, leaf only).
pub const TLS_CERT: &str = "tls.crt";
/// The serving certificate's key (PEM, PKCS#8).
pub const TLS_KEY: &str = "tls.key";

/// How long certificates live. Each is renewed once less than a third of its life is left, so
/// a serving certificate is replaced months before it expires, and a new CA is added to the
/// trusted bundle years before the old one expires (the old one stays trusted until then, so
/// a serving certificate it signed keeps working while the new bundle spreads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetimes {
    /// The CA's validity.
    pub ca: Duration,
    /// The serving certificate's validity.
    pub serving: Duration,
}

impl Default for Lifetimes {
    fn default() -> Self {
        const DAY: u64 = 24 * 3600;
        Lifetimes {
            ca: Duration::from_secs(10 * 365 * DAY),
            serving: Duration::from_secs(365 * DAY),
        }
    }
}

/// A certificate is backdated this much, so that an API server whose clock is a little behind
/// nmo's accepts it at once.
const BACKDATE: Duration = Duration::from_secs(3600);

/// Why certificates could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum MaterialError {
    /// rcgen refused (a key could not be generated, a name is invalid).
    #[error("cannot make the webhook certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// A time outside what a certificate can carry.
    #[error("cannot express the certificate's validity: {0}")]
    Time(String),
}

/// The PEM texts the Secret holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Material {
    /// Every trusted CA, newest first (what the webhook configuration's `caBundle` carries).
    pub ca_bundle: String,
    /// The newest CA's key.
    pub ca_key: String,
    /// The serving certificate.
    pub tls_cert: String,
    /// The serving certificate's key.
    pub tls_key: String,
}

impl Material {
    /// From a Secret's data; None when a key is missing or not UTF-8.
    pub fn from_data(data: &BTreeMap<String, Vec<u8>>) -> Option<Self> {
        let text = |key: &str| {
            data.get(key)
                .and_then(|bytes| String::from_utf8(bytes.clone()).ok())
        };
        Some(Material {
            ca_bundle: text(CA_CERT)?,
            ca_key: text(CA_KEY)?,
            tls_cert: text(TLS_CERT)?,
            tls_key: text(TLS_KEY)?,
        })
    }

    /// The Secret's data.
    pub fn to_data(&self) -> BTreeMap<String, Vec<u8>> {
        BTreeMap::from([
            (CA_CERT.to_string(), self.ca_bundle.clone().into_bytes()),
            (CA_KEY.to_string(), self.ca_key.clone().into_bytes()),
            (TLS_CERT.to_string(), self.tls_cert.clone().into_bytes()),
            (TLS_KEY.to_string(), self.tls_key.clone().into_bytes()),
        ])
    }
}

/// What a certificate says about itself that matters here.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Facts {
    not_before: SystemTime,
    not_after: SystemTime,
    subject: Vec<u8>,
    issuer: Vec<u8>,
    dns_names: Vec<String>,
}

fn facts(der: &[u8]) -> Option<Facts> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let time = |t: x509_parser::time::ASN1Time| {
        u64::try_from(t.timestamp())
            .ok()
            .map(|s| UNIX_EPOCH + Duration::from_secs(s))
    };
    let validity = cert.validity();
    let dns_names = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    GeneralName::DNSName(dns) => Some((*dns).to_string()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    Some(Facts {
        not_before: time(validity.not_before)?,
        not_after: time(validity.not_after)?,
        subject: cert.subject().as_raw().to_vec(),
        issuer: cert.issuer().as_raw().to_vec(),
        dns_names,
    })
}

fn pem_certificates(text: &str) -> Vec<Vec<u8>> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(text.as_bytes())
        .filter_map(Result::ok)
        .map(|der| der.to_vec())
        .collect()
}

/// What the stored material needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Serve it as it is.
    Keep,
    /// Nothing usable (missing, unreadable, expired CA): a new CA and serving certificate.
    Fresh,
    /// The newest CA nears its end: add a new one in front of the bundle (the serving
    /// certificate stays until its own renewal, so the new CA is trusted everywhere first).
    AddCa,
    /// The serving certificate nears its end, names the wrong hosts, or was signed by a CA no
    /// longer trusted: a new one from the newest CA.
    RenewServing,
}

fn nearly_over(facts: &Facts, lifetime: Duration, now: SystemTime) -> bool {
    let left = facts.not_after.duration_since(now).unwrap_or_default();
    left < lifetime / 3
}

/// Decides what `material` needs at `now` to serve `dns_names`.
pub fn assess(
    material: Option<&Material>,
    dns_names: &[String],
    lifetimes: Lifetimes,
    now: SystemTime,
) -> Verdict {
    let Some(material) = material else {
        return Verdict::Fresh;
    };
    let cas: Vec<Facts> = pem_certificates(&material.ca_bundle)
        .iter()
        .filter_map(|der| facts(der))
        .collect();
    let Some(newest) = cas.first() else {
        return Verdict::Fresh;
    };
    if newest.not_after <= now || KeyPair::from_pem(&material.ca_key).is_err() {
        return Verdict::Fresh;
    }
    let serving = pem_certificates(&material.tls_cert)
        .first()
        .and_then(|der| facts(der));
    let Some(serving) = serving else {
        return Verdict::RenewServing;
    };
    if KeyPair::from_pem(&material.tls_key).is_err() {
        return Verdict::RenewServing;
    }
    if nearly_over(newest, lifetimes.ca, now) {
        return Verdict::AddCa;
    }
    let trusted = cas
        .iter()
        .any(|ca| ca.subject == serving.issuer && ca.not_after > now);
    let names_fit = dns_names.iter().all(|n| serving.dns_names.contains(n));
    if !trusted
        || !names_fit
        || serving.not_before > now
        || nearly_over(&serving, lifetimes.serving, now)
    {
        return Verdict::RenewServing;
    }
    Verdict::Keep
}

fn offset(time: SystemTime) -> Result<time::OffsetDateTime, MaterialError> {
    let seconds = time
        .duration_since(UNIX_EPOCH)
        .map_err(|e| MaterialError::Time(e.to_string()))?
        .as_secs();
    let seconds = i64::try_from(seconds).map_err(|e| MaterialError::Time(e.to_string()))?;
    time::OffsetDateTime::from_unix_timestamp(seconds)
        .map_err(|e| MaterialError::Time(e.to_string()))
}

fn validity(
    params: &mut CertificateParams,
    now: SystemTime,
    lifetime: Duration,
) -> Result<(), MaterialError> {
    params.not_before = offset(now.checked_sub(BACKDATE).unwrap_or(now))?;
    params.not_after = offset(now + lifetime)?;
    Ok(())
}

/// A new self-signed CA: its PEM certificate and key.
fn new_ca(lifetimes: Lifetimes, now: SystemTime) -> Result<(String, String), MaterialError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    // A random part tells CAs apart (a serving certificate names its issuer's subject).
    name.push(
        DnType::CommonName,
        format!("nmo-webhook-ca-{:016x}", rand::random::<u64>()),
    );
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut params, now, lifetimes.ca)?;
    let cert = params.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A serving certificate for `dns_names` signed by the CA `ca_cert` with `ca_key`.
fn new_serving(
    ca_cert: &str,
    ca_key: &str,
    dns_names: &[String],
    lifetimes: Lifetimes,
    now: SystemTime,
) -> Result<(String, String), MaterialError> {
    let ca_key = KeyPair::from_pem(ca_key)?;
    let issuer = Issuer::from_ca_cert_pem(ca_cert, ca_key)?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(dns_names.to_vec())?;
    let mut name = DistinguishedName::new();
    if let Some(first) = dns_names.first() {
        name.push(DnType::CommonName, first.clone());
    }
    params.distinguished_name = name;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    validity(&mut params, now, lifetimes.serving)?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The CAs of `bundle` still valid at `now`, as PEM.
fn unexpired(bundle: &str, now: SystemTime) -> String {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(bundle.as_bytes())
        .filter_map(Result::ok)
        .filter(|der| facts(der).is_some_and(|f| f.not_after > now))
        .map(|der| pem_of(&der))
        .collect()
}

fn pem_of(der: &[u8]) -> String {
    let config = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
    pem::encode_config(&pem::Pem::new("CERTIFICATE", der.to_vec()), config)
}

/// What `verdict` makes of `material` (None for [`Verdict::Keep`]: nothing to write).
pub fn apply(
    verdict: Verdict,
    material: Option<&Material>,
    dns_names: &[String],
    lifetimes: Lifetimes,
    now: SystemTime,
) -> Result<Option<Material>, MaterialError> {
    let current = material.cloned().unwrap_or_default();
    let renewed = match verdict {
        Verdict::Keep => return Ok(None),
        Verdict::Fresh => {
            let (ca_cert, ca_key) = new_ca(lifetimes, now)?;
            let (tls_cert, tls_key) = new_serving(&ca_cert, &ca_key, dns_names, lifetimes, now)?;
            Material {
                ca_bundle: ca_cert,
                ca_key,
                tls_cert,
                tls_key,
            }
        }
        Verdict::AddCa => {
            let (ca_cert, ca_key) = new_ca(lifetimes, now)?;
            Material {
                ca_bundle: format!("{ca_cert}{}", unexpired(&current.ca_bundle, now)),
                ca_key,
                ..current
            }
        }
        Verdict::RenewServing => {
            let newest = pem_certificates(&current.ca_bundle)
                .first()
                .map(|der| pem_of(der))
                .unwrap_or_default();
            let (tls_cert, tls_key) =
                new_serving(&newest, &current.ca_key, dns_names, lifetimes, now)?;
            Material {
                ca_bundle: unexpired(&current.ca_bundle, now),
                tls_cert,
                tls_key,
                ..current
            }
        }
    };
    Ok(Some(renewed))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 3600);

    fn names() -> Vec<String> {
        vec![
            "nmo-webhook.nmo-system.svc".to_string(),
            "nmo-webhook.nmo-system.svc.cluster.local".to_string(),
        ]
    }

    fn fresh(now: SystemTime) -> Material {
        fresh_for(Lifetimes::default(), now)
    }

    fn fresh_for(lifetimes: Lifetimes, now: SystemTime) -> Material {
        apply(Verdict::Fresh, None, &names(), lifetimes, now)
            .expect("made")
            .expect("something to write")
    }

    #[test]
    fn nothing_stored_gets_a_fresh_ca_and_serving_certificate_that_it_keeps() {
        let now = SystemTime::now();
        let lifetimes = Lifetimes::default();
        assert_eq!(assess(None, &names(), lifetimes, now), Verdict::Fresh);
        let material = fresh(now);
        assert_eq!(
            assess(Some(&material), &names(), lifetimes, now),
            Verdict::Keep
        );
        let round_trip = Material::from_data(&material.to_data()).expect("readable");
        assert_eq!(round_trip, material);
        // A month on, still nothing to do.
        assert_eq!(
            assess(Some(&material), &names(), lifetimes, now + 30 * DAY),
            Verdict::Keep
        );
    }

    #[test]
    fn the_serving_certificate_is_renewed_months_before_it_expires_by_the_same_ca() {
        let now = SystemTime::now();
        let lifetimes = Lifetimes::default();
        let material = fresh(now);
        let later = now + 250 * DAY;
        assert_eq!(
            assess(Some(&material), &names(), lifetimes, later),
            Verdict::RenewServing
        );
        let renewed = apply(
            Verdict::RenewServing,
            Some(&material),
            &names(),
            lifetimes,
            later,
        )
        .expect("renewed")
        .expect("written");
        assert_eq!(renewed.ca_bundle, material.ca_bundle, "same trust");
        assert_ne!(renewed.tls_cert, material.tls_cert);
        assert_eq!(
            assess(Some(&renewed), &names(), lifetimes, later),
            Verdict::Keep
        );
    }

    #[test]
    fn an_aging_ca_is_joined_by_a_new_one_before_serving_moves_to_it() {
        let now = SystemTime::now();
        let lifetimes = Lifetimes {
            ca: 30 * DAY,
            serving: 6 * DAY,
        };
        let step = |material: &Material, day: u32, expected: Verdict| {
            let at = now + day * DAY;
            assert_eq!(
                assess(Some(material), &names(), lifetimes, at),
                expected,
                "day {day}"
            );
            apply(expected, Some(material), &names(), lifetimes, at)
                .expect("made")
                .unwrap_or_else(|| material.clone())
        };
        let day0 = fresh_for(lifetimes, now);
        // The serving certificate is renewed by the CA, which has time left.
        let day19 = step(&day0, 19, Verdict::RenewServing);
        assert_eq!(day19.ca_bundle, day0.ca_bundle);
        // The CA nears its end: a new one joins the bundle, in front; serving stays.
        let day21 = step(&day19, 21, Verdict::AddCa);
        assert_eq!(pem_certificates(&day21.ca_bundle).len(), 2);
        assert!(day21.ca_bundle.ends_with(&day0.ca_bundle));
        assert_eq!(day21.tls_cert, day19.tls_cert, "serving stays for now");
        let day21 = step(&day21, 21, Verdict::Keep);
        // Serving's own renewal comes from the new CA; the old one is still trusted.
        let day24 = step(&day21, 24, Verdict::RenewServing);
        assert_eq!(day24.ca_bundle, day21.ca_bundle);
        // Once the old CA expired, it leaves the bundle.
        let day31 = step(&day24, 31, Verdict::RenewServing);
        assert_eq!(pem_certificates(&day31.ca_bundle).len(), 1);
        assert!(day21.ca_bundle.starts_with(&day31.ca_bundle));
        step(&day31, 31, Verdict::Keep);
    }

    #[test]
    fn expired_garbled_or_misnamed_material_is_replaced() {
        let now = SystemTime::now();
        let lifetimes = Lifetimes::default();
        let material = fresh(now);
        assert_eq!(
            assess(Some(&material), &names(), lifetimes, now + 3651 * DAY),
            Verdict::Fresh,
            "expired CA"
        );
        let garbled = Material {
            ca_bundle: "not a certificate".into(),
            ..material.clone()
        };
        assert_eq!(
            assess(Some(&garbled), &names(), lifetimes, now),
            Verdict::Fresh
        );
        let other_names = vec!["other.nmo-system.svc".to_string()];
        assert_eq!(
            assess(Some(&material), &other_names, lifetimes, now),
            Verdict::RenewServing
        );
        let foreign = fresh(now);
        let mixed = Material {
            tls_cert: foreign.tls_cert,
            tls_key: foreign.tls_key,
            ..material
        };
        assert_eq!(
            assess(Some(&mixed), &names(), lifetimes, now),
            Verdict::RenewServing,
            "signed by a CA the bundle does not trust"
        );
    }

    #[test]
    fn the_serving_certificate_verifies_against_the_bundle_for_the_service_name() {
        let now = SystemTime::now();
        let material = fresh(now);
        let mut roots = rustls::RootCertStore::empty();
        for der in pem_certificates(&material.ca_bundle) {
            roots.add(der.into()).expect("a CA");
        }
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            std::sync::Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .expect("a verifier");
        let leaf = pem_certificates(&material.tls_cert).remove(0);
        let name =
            rustls_pki_types::ServerName::try_from("nmo-webhook.nmo-system.svc").expect("a name");
        use rustls::client::danger::ServerCertVerifier;
        verifier
            .verify_server_cert(
                &leaf.into(),
                &[],
                &name,
                &[],
                rustls_pki_types::UnixTime::now(),
            )
            .expect("trusted for the service's name");
    }
}

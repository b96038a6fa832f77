//! The control plane's certificates: one CA that signs the API server's serving certificate and
//! every client certificate (the API server authenticates a client certificate signed by its
//! `--client-ca-file` as user = CN, groups = O), and the service-account signing key.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::error::{Error, Result};

/// The object identifier of an X.509 organization (O) attribute.
const ORGANIZATION_OID: [u64; 4] = [2, 5, 4, 10];

/// A certificate and its private key, PEM encoded.
#[derive(Clone, Debug)]
pub struct CertAndKey {
    /// The certificate.
    pub cert_pem: String,
    /// The private key (PKCS#8).
    pub key_pem: String,
}

/// The control plane's certificate authority.
pub struct Pki {
    ca: CertifiedIssuer<'static, KeyPair>,
}

fn certificate_error(what: &str) -> impl FnOnce(rcgen::Error) -> Error + '_ {
    move |source| Error::Certificate {
        what: what.to_string(),
        source,
    }
}

impl Pki {
    /// A fresh CA.
    pub fn new() -> Result<Pki> {
        let key = KeyPair::generate().map_err(certificate_error("the CA key"))?;
        let mut params =
            CertificateParams::new(Vec::<String>::new()).map_err(certificate_error("the CA"))?;
        params
            .distinguished_name
            .push(DnType::CommonName, "nmo-envtest-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(params, key).map_err(certificate_error("the CA"))?;
        Ok(Pki { ca })
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// The CA certificate, DER (what kube's client takes as a root).
    pub fn ca_der(&self) -> Vec<u8> {
        self.ca.der().to_vec()
    }

    /// The CA's private key, PEM (the controller manager signs with it).
    pub fn ca_key_pem(&self) -> String {
        self.ca.key().serialize_pem()
    }

    /// A serving certificate for `names` (DNS names or IP addresses).
    pub fn serving(&self, common_name: &str, names: &[&str]) -> Result<CertAndKey> {
        let what = format!("the serving certificate of {common_name}");
        let names: Vec<String> = names.iter().map(|name| name.to_string()).collect();
        let mut params = CertificateParams::new(names).map_err(certificate_error(&what))?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params, &what)
    }

    /// A client certificate for `user` in `groups` (at most two: each is an O attribute, and
    /// rcgen keeps one value per attribute type, so the second is written under the O
    /// attribute's raw object identifier).
    pub fn client(&self, user: &str, groups: &[String]) -> Result<CertAndKey> {
        let what = format!("the client certificate of {user}");
        let mut params =
            CertificateParams::new(Vec::<String>::new()).map_err(certificate_error(&what))?;
        params.distinguished_name.push(DnType::CommonName, user);
        let mut group_types = [
            DnType::OrganizationName,
            DnType::CustomDnType(ORGANIZATION_OID.to_vec()),
        ]
        .into_iter();
        for group in groups {
            let Some(kind) = group_types.next() else {
                return Err(Error::TooManyGroups {
                    user: user.to_string(),
                    groups: groups.len(),
                });
            };
            params.distinguished_name.push(kind, group.as_str());
        }
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params, &what)
    }

    fn sign(&self, params: CertificateParams, what: &str) -> Result<CertAndKey> {
        let key = KeyPair::generate().map_err(certificate_error(what))?;
        let cert = params
            .signed_by(&key, &self.ca)
            .map_err(certificate_error(what))?;
        Ok(CertAndKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// The key pair service-account tokens are signed with: private and public key, PEM.
pub fn service_account_key() -> Result<(String, String)> {
    let key = KeyPair::generate().map_err(certificate_error("the service-account key"))?;
    Ok((key.serialize_pem(), key.public_key_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificates_are_pem() {
        let pki = Pki::new().unwrap();
        assert!(pki.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(pki.ca_key_pem().contains("PRIVATE KEY"));
        let serving = pki
            .serving("kube-apiserver", &["127.0.0.1", "localhost"])
            .unwrap();
        assert!(serving.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        let client = pki
            .client("alice", &["team-a".into(), "team-b".into()])
            .unwrap();
        assert!(client.key_pem.contains("PRIVATE KEY"));
        let (private, public) = service_account_key().unwrap();
        assert!(private.contains("PRIVATE KEY") && public.contains("PUBLIC KEY"));
    }

    #[test]
    fn more_than_two_groups_are_refused() {
        let pki = Pki::new().unwrap();
        let groups = ["a".to_string(), "b".to_string(), "c".to_string()];
        let error = pki.client("bob", &groups).unwrap_err().to_string();
        assert!(
            error.contains("bob") && error.contains("at most two"),
            "{error}"
        );
    }
}

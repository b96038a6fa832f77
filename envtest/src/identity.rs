//! Who a client is: a user name and groups, authenticated by a client certificate signed by the
//! control plane's CA (the API server takes CN as the user and each O as a group).

use std::fmt;

/// The user of [`Identity::admin`].
pub const ADMIN_USER: &str = "nmo-envtest-admin";

/// A user and its groups, as the API server's authenticator reports them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    user: String,
    groups: Vec<String>,
}

impl Identity {
    /// A cluster administrator: in `system:masters`, which the default RBAC policy binds to
    /// `cluster-admin` (and which skips authorization altogether).
    pub fn admin() -> Identity {
        Identity::user(ADMIN_USER, ["system:masters"])
    }

    /// `user` in `groups` (at most two groups: see [`crate::Error::TooManyGroups`]). With no
    /// binding naming it, it may do nothing but what the default policy grants every
    /// authenticated user (discovery, self reviews).
    pub fn user<G: Into<String>>(
        user: impl Into<String>,
        groups: impl IntoIterator<Item = G>,
    ) -> Identity {
        Identity {
            user: user.into(),
            groups: groups.into_iter().map(Into::into).collect(),
        }
    }

    /// The user a ServiceAccount's token authenticates as, with its two groups. RBAC bindings
    /// whose subject is `{kind: ServiceAccount, namespace, name}` apply to it, so the bindings
    /// of a deployment's manifests work unchanged. Unlike a real token, the certificate does
    /// not require the ServiceAccount object to exist.
    pub fn service_account(namespace: &str, name: &str) -> Identity {
        Identity::user(
            format!("system:serviceaccount:{namespace}:{name}"),
            [
                "system:serviceaccounts".to_string(),
                format!("system:serviceaccounts:{namespace}"),
            ],
        )
    }

    /// The user name.
    pub fn name(&self) -> &str {
        &self.user
    }

    /// The groups.
    pub fn groups(&self) -> &[String] {
        &self.groups
    }

    /// A file name for this identity's certificate and kubeconfig: the user name made safe,
    /// plus a hash of the whole identity so that two identities never share one.
    pub(crate) fn file_stem(&self) -> String {
        let safe: String = self
            .user
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(60)
            .collect();
        format!("{safe}-{:016x}", fnv1a(&format!("{self:?}")))
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.user)?;
        if !self.groups.is_empty() {
            write!(f, " (groups {})", self.groups.join(", "))?;
        }
        Ok(())
    }
}

/// FNV-1a: a fixed function, so that a name does not depend on the Rust release.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_account_is_named_as_its_token_would_be() {
        let nmo = Identity::service_account("nmo-system", "nmo");
        assert_eq!(nmo.name(), "system:serviceaccount:nmo-system:nmo");
        assert_eq!(
            nmo.groups(),
            [
                "system:serviceaccounts",
                "system:serviceaccounts:nmo-system"
            ]
        );
    }

    #[test]
    fn file_stems_are_safe_and_distinct() {
        let a = Identity::user("system:serviceaccount:a:b", Vec::<String>::new());
        let b = Identity::user("system:serviceaccount:a:b", ["g"]);
        assert!(
            a.file_stem()
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
        assert_ne!(a.file_stem(), b.file_stem());
        assert_eq!(a.file_stem(), a.clone().file_stem());
    }
}

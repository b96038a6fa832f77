//! The start-up check of nmo's own rights: one SelfSubjectAccessReview per thing nmo will do,
//! asked before anything runs, so that a missing grant (a LEASE_NAMESPACE changed without its
//! Role, say) stops nmo at once with what is missing and where, instead of a 403 every few
//! seconds for ever.

use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};

/// One right nmo needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// Where (None: cluster wide).
    pub namespace: Option<String>,
    /// The API group ("" for the core group).
    pub group: &'static str,
    /// The resource, `pods/eviction` for a subresource.
    pub resource: &'static str,
    /// The verb.
    pub verb: &'static str,
}

impl std::fmt::Display for Need {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            self.group
        };
        write!(f, "{} {} ({group})", self.verb, self.resource)?;
        match &self.namespace {
            Some(namespace) => write!(f, " in namespace {namespace}"),
            None => write!(f, " cluster wide"),
        }
    }
}

/// What nmo may not do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "nmo's service account lacks {}: grant them (deploy/base/rbac.yaml; for another LEASE_NAMESPACE, deploy/components/lease-namespace)",
    list(.0)
)]
pub struct MissingRights(pub Vec<Need>);

fn list(needs: &[Need]) -> String {
    needs
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn need(
    namespace: Option<&str>,
    group: &'static str,
    resource: &'static str,
    verb: &'static str,
) -> Need {
    Need {
        namespace: namespace.map(str::to_string),
        group,
        resource,
        verb,
    }
}

/// The rights nmo's run needs: its watches and writes, the node leases in `lease_namespace`,
/// the leader lease in `leader_namespace` (with election), events in `default`.
pub fn needs(lease_namespace: &str, leader_namespace: Option<&str>) -> Vec<Need> {
    let mut needs = vec![
        need(
            None,
            "nodemaintenance.medik8s.io",
            "nodemaintenances",
            "watch",
        ),
        need(
            None,
            "nodemaintenance.medik8s.io",
            "nodemaintenances",
            "patch",
        ),
        need(
            None,
            "nodemaintenance.medik8s.io",
            "nodemaintenances/status",
            "patch",
        ),
        need(None, "", "nodes", "watch"),
        need(None, "", "nodes", "patch"),
        need(None, "", "pods", "watch"),
        need(None, "", "pods", "delete"),
        need(None, "", "pods/eviction", "create"),
        need(Some("default"), "events.k8s.io", "events", "create"),
        // What acts on eviction requests (the VMI watch is left out: KubeVirt is optional).
        need(
            None,
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
            "watch",
        ),
        need(
            None,
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            "watch",
        ),
    ];
    for verb in ["get", "list", "watch", "create", "update", "delete"] {
        needs.push(need(
            Some(lease_namespace),
            "coordination.k8s.io",
            "leases",
            verb,
        ));
    }
    if let Some(namespace) = leader_namespace {
        for verb in ["get", "create", "update"] {
            needs.push(need(Some(namespace), "coordination.k8s.io", "leases", verb));
        }
    }
    needs
}

/// Asks the API server about each need. An API server that cannot answer (no
/// SelfSubjectAccessReview, no answer in `timeout`) is no reason to refuse to start: nmo then
/// says so and goes on; a refused need is.
pub async fn check(
    client: &Client,
    needs: &[Need],
    timeout: Duration,
) -> Result<(), MissingRights> {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let asks = needs.iter().map(|need| {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    namespace: need.namespace.clone(),
                    group: Some(need.group.to_string()),
                    resource: Some(need.resource.split('/').next().unwrap_or_default().to_string()),
                    subresource: need.resource.split_once('/').map(|(_, s)| s.to_string()),
                    verb: Some(need.verb.to_string()),
                    ..ResourceAttributes::default()
                }),
                ..SelfSubjectAccessReviewSpec::default()
            },
            ..SelfSubjectAccessReview::default()
        };
        let api = api.clone();
        async move {
            let asked = tokio::time::timeout(timeout, api.create(&PostParams::default(), &review)).await;
            match asked {
                Ok(Ok(answer)) => Some(answer.status.is_some_and(|s| s.allowed)),
                Ok(Err(error)) => {
                    tracing::warn!(%error, %need, "cannot check nmo's rights; going on unchecked");
                    None
                }
                Err(_) => {
                    tracing::warn!(%need, ?timeout, "no answer checking nmo's rights; going on unchecked");
                    None
                }
            }
        }
    });
    let answers = join_all(asks).await;
    let missing: Vec<Need> = needs
        .iter()
        .zip(answers)
        .filter(|(_, allowed)| *allowed == Some(false))
        .map(|(need, _)| need.clone())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(MissingRights(missing))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_each_missing_right_and_where() {
        let error = MissingRights(vec![
            need(Some("my-leases"), "coordination.k8s.io", "leases", "create"),
            need(None, "", "pods/eviction", "create"),
        ]);
        let text = error.to_string();
        assert!(
            text.contains("create leases (coordination.k8s.io) in namespace my-leases"),
            "{text}"
        );
        assert!(
            text.contains("create pods/eviction (core) cluster wide"),
            "{text}"
        );
        assert!(text.contains("deploy/components/lease-namespace"), "{text}");
    }

    #[test]
    fn leader_leases_are_needed_only_with_election() {
        let without = needs("medik8s-leases", None);
        let with = needs("medik8s-leases", Some("nmo-system"));
        assert_eq!(with.len(), without.len() + 3);
        assert!(
            with.iter()
                .any(|n| n.namespace.as_deref() == Some("nmo-system") && n.verb == "update")
        );
    }
}

//! Steps 2 and 3 of `nmo uninstall`: the CRD, then every object of nmo's manifests (they all
//! carry [`NMO_LABEL`]), kind by kind in [`KINDS`]' order, and the wait until they are gone.
//! Kinds a cluster does not serve (cert-manager's, the Prometheus operator's) are skipped.

use std::io::Write;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams};

use super::{NMO_LABEL, POLL_INTERVAL, UninstallError, bounded, is_not_found};
use crate::crd::NodeMaintenance;

/// A kind of object nmo's manifests create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    /// The API group ("" for the core group).
    pub group: &'static str,
    /// The version.
    pub version: &'static str,
    /// The kind.
    pub kind: &'static str,
    /// The resource's plural name.
    pub plural: &'static str,
    /// Whether its objects live in a namespace.
    pub namespaced: bool,
}

const fn kind(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> Kind {
    Kind {
        group,
        version,
        kind,
        plural,
        namespaced,
    }
}

/// Every kind nmo's manifests create (but the CRD, which goes first), in the order they are
/// deleted. The Deployment first: while a NodeMaintenance created since step 1 holds a node,
/// the uninstall guard refuses that delete, and nothing is taken from nmo. The webhook
/// configuration next (nothing answers it any more). The guard after nmo's rights, so that it
/// keeps them while anything could still need them. The namespaces last, as they take what
/// is left in them.
pub const KINDS: &[Kind] = &[
    kind("apps", "v1", "Deployment", "deployments", true),
    kind(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        false,
    ),
    kind(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
    kind("", "v1", "Service", "services", true),
    kind(
        "monitoring.coreos.com",
        "v1",
        "ServiceMonitor",
        "servicemonitors",
        true,
    ),
    kind(
        "monitoring.coreos.com",
        "v1",
        "PrometheusRule",
        "prometheusrules",
        true,
    ),
    kind("cert-manager.io", "v1", "Certificate", "certificates", true),
    kind("cert-manager.io", "v1", "Issuer", "issuers", true),
    kind("", "v1", "ConfigMap", "configmaps", true),
    kind("", "v1", "Secret", "secrets", true),
    kind("", "v1", "ResourceQuota", "resourcequotas", true),
    kind(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
    ),
    kind("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
    kind(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    kind(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    // deploy/components/flow-control: the FlowSchema before the priority level it names.
    // Deleting them while nmo's pods still terminate only sends their last requests to the
    // built-in `service-accounts` FlowSchema.
    kind(
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "FlowSchema",
        "flowschemas",
        false,
    ),
    kind(
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "PriorityLevelConfiguration",
        "prioritylevelconfigurations",
        false,
    ),
    kind("", "v1", "ServiceAccount", "serviceaccounts", true),
    kind(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        false,
    ),
    kind(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        false,
    ),
    kind("", "v1", "Namespace", "namespaces", false),
];

/// Namespaces never deleted, even labelled as nmo's: the shared node lease namespace (Node
/// Health Check, Self Node Remediation and the others keep their leases there) and the
/// cluster's own.
pub const PROTECTED_NAMESPACES: &[&str] = &[
    nmo_actors::config::defaults::LEASE_NAMESPACE,
    "default",
    "kube-system",
    "kube-public",
    "kube-node-lease",
];

impl Kind {
    fn resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.to_string(),
            version: self.version.to_string(),
            api_version: if self.group.is_empty() {
                self.version.to_string()
            } else {
                format!("{}/{}", self.group, self.version)
            },
            kind: self.kind.to_string(),
            plural: self.plural.to_string(),
        }
    }
}

/// One of nmo's objects.
struct Found {
    kind: Kind,
    namespace: Option<String>,
    name: String,
    /// Whether its deletion has started already (a namespace still emptying, say).
    terminating: bool,
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{} {namespace}/{}", self.kind.kind, self.name),
            None => write!(f, "{} {}", self.kind.kind, self.name),
        }
    }
}

/// Deletes the NodeMaintenance CRD and waits up to `timeout` until it is gone.
pub async fn remove_crd(
    client: &kube::Client,
    timeout: Duration,
    out: &mut (dyn Write + Send),
) -> Result<(), UninstallError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = NodeMaintenance::crd_name();
    let what = format!("delete CustomResourceDefinition {name}");
    match bounded(what, api.delete(name, &DeleteParams::background())).await {
        Ok(_) => writeln!(out, "deleting CustomResourceDefinition {name}")?,
        Err(error) if is_not_found(&error) => return Ok(()),
        Err(error) => return Err(error),
    }
    let deadline = Instant::now() + timeout;
    loop {
        let what = format!("read CustomResourceDefinition {name}");
        if bounded(what, api.get_opt(name)).await?.is_none() {
            return Ok(());
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(UninstallError::NotGone {
                left: format!("CustomResourceDefinition {name}"),
                after: timeout,
            });
        }
        tokio::time::sleep(POLL_INTERVAL.min(deadline - now)).await;
    }
}

/// Deletes every object of [`KINDS`] labelled as nmo's (but [`PROTECTED_NAMESPACES`]) and
/// waits up to `timeout` until they are gone.
pub async fn remove_all(
    client: &kube::Client,
    timeout: Duration,
    out: &mut (dyn Write + Send),
) -> Result<(), UninstallError> {
    for kind in KINDS {
        for found in labelled(client, *kind).await? {
            if found.terminating {
                continue;
            }
            let what = format!("delete {found}");
            match bounded(
                what,
                api(client, &found).delete(&found.name, &DeleteParams::background()),
            )
            .await
            {
                Ok(_) => writeln!(out, "deleted {found}")?,
                Err(error) if is_not_found(&error) => {}
                Err(error) => return Err(error),
            }
        }
    }
    let deadline = Instant::now() + timeout;
    let mut reported = String::new();
    loop {
        let mut left = Vec::new();
        for kind in KINDS {
            left.extend(labelled(client, *kind).await?.iter().map(Found::to_string));
        }
        if left.is_empty() {
            return Ok(());
        }
        let left = left.join(", ");
        let now = Instant::now();
        if now >= deadline {
            return Err(UninstallError::NotGone {
                left,
                after: timeout,
            });
        }
        if left != reported {
            writeln!(out, "waiting for {left} to be deleted")?;
            reported = left;
        }
        tokio::time::sleep(POLL_INTERVAL.min(deadline - now)).await;
    }
}

/// The objects of `kind` labelled as nmo's, but protected namespaces; none when the cluster
/// does not serve `kind`.
async fn labelled(client: &kube::Client, kind: Kind) -> Result<Vec<Found>, UninstallError> {
    let resource = kind.resource();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let what = format!("list {} labelled {NMO_LABEL}", kind.plural);
    let listed = match bounded(what, api.list(&ListParams::default().labels(NMO_LABEL))).await {
        Ok(list) => list.items,
        Err(error) if is_not_found(&error) => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    Ok(listed
        .into_iter()
        .map(|object| Found {
            kind,
            terminating: object.metadata.deletion_timestamp.is_some(),
            namespace: object.metadata.namespace,
            name: object.metadata.name.unwrap_or_default(),
        })
        .filter(|found| !(kind.kind == "Namespace" && PROTECTED_NAMESPACES.contains(&&*found.name)))
        .collect())
}

fn api(client: &kube::Client, found: &Found) -> Api<DynamicObject> {
    let resource = found.kind.resource();
    match &found.namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

//! The table of served resources: built-in ones and those registered by CustomResourceDefinitions.

use std::sync::{Arc, RwLock};

use serde_json::{Value, json};

use crate::errors::SimError;

/// The verbs every served resource supports.
pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// One served resource (one group/version/plural).
#[derive(Debug, Clone)]
pub struct ResourceDef {
    /// API group ("" for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural resource name, as in URLs.
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// Kind of lists.
    pub list_kind: String,
    /// Namespace scoped?
    pub namespaced: bool,
    /// kubectl short names.
    pub short_names: Vec<String>,
    /// Categories (e.g. `all`).
    pub categories: Vec<String>,
    /// Has a `status` subresource (status written only through it).
    pub status_subresource: bool,
    /// Field selectors supported besides `metadata.name`/`metadata.namespace` (JSON paths, dotted).
    pub fields: Vec<String>,
    /// Index of the field (in `fields`) the store indexes, e.g. pods by `spec.nodeName`.
    pub indexed_field: Option<usize>,
    /// `additionalPrinterColumns` of a CRD version.
    pub printer_columns: Vec<Value>,
    /// `openAPIV3Schema` of a CRD version (for pruning and required fields).
    pub schema: Option<Value>,
    /// Defined by a CRD (generic handling).
    pub custom: bool,
    /// Stored as core/v1 Events and converted on the way in and out (events.k8s.io/v1), as
    /// the real server shares one storage between the two APIs.
    pub converted: bool,
}

impl ResourceDef {
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The store key: objects are shared by all versions of a group/plural.
    pub fn key(&self) -> String {
        if self.converted {
            return format!("/{}", self.plural);
        }
        format!("{}/{}", self.group, self.plural)
    }

    /// Position of a supported field selector path.
    pub fn field_index(&self, path: &str) -> Option<usize> {
        if self.converted {
            // events.k8s.io field names over the core/v1 fields they are stored as.
            let core = match path {
                "reportingController" => "reportingComponent".to_string(),
                "deprecatedSource" => "source".to_string(),
                p => match p.strip_prefix("regarding.") {
                    Some(rest) => format!("involvedObject.{rest}"),
                    None => p.to_string(),
                },
            };
            return self.fields.iter().position(|f| *f == core);
        }
        self.fields.iter().position(|f| f == path)
    }

    #[allow(clippy::too_many_arguments)]
    fn builtin(
        group: &str,
        version: &str,
        plural: &str,
        kind: &str,
        namespaced: bool,
        short: &[&str],
        status: bool,
        fields: &[&str],
    ) -> Self {
        ResourceDef {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            kind: kind.into(),
            list_kind: format!("{kind}List"),
            namespaced,
            short_names: short.iter().map(|s| s.to_string()).collect(),
            categories: Vec::new(),
            status_subresource: status,
            fields: fields.iter().map(|s| s.to_string()).collect(),
            indexed_field: None,
            printer_columns: Vec::new(),
            schema: None,
            custom: false,
            converted: false,
        }
    }
}

fn builtins() -> Vec<ResourceDef> {
    let mut defs = core_defs();
    defs.extend(workload_defs());
    defs.extend(extension_defs());
    defs
}

/// The field selectors of events (of both APIs: they share one storage).
const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

/// `def` in `categories` (what `kubectl get all` and the like list).
fn in_categories(mut def: ResourceDef, categories: &[&str]) -> ResourceDef {
    def.categories = categories.iter().map(|c| c.to_string()).collect();
    def
}

/// Pods, listed by node from an index of `spec.nodeName`.
fn pod_def() -> ResourceDef {
    let mut pods = ResourceDef::builtin(
        "",
        "v1",
        "pods",
        "Pod",
        true,
        &["po"],
        true,
        &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
    );
    pods.indexed_field = Some(0);
    pods
}

/// Namespaces, nodes, pods, events (core and events.k8s.io) and leases.
fn core_defs() -> Vec<ResourceDef> {
    let event = |group: &str| {
        ResourceDef::builtin(
            group,
            "v1",
            "events",
            "Event",
            true,
            &["ev"],
            false,
            EVENT_FIELDS,
        )
    };
    let mut events_v1 = event("events.k8s.io");
    events_v1.converted = true;
    vec![
        ResourceDef::builtin(
            "",
            "v1",
            "namespaces",
            "Namespace",
            false,
            &["ns"],
            true,
            &["status.phase"],
        ),
        ResourceDef::builtin(
            "",
            "v1",
            "nodes",
            "Node",
            false,
            &["no"],
            true,
            &["spec.unschedulable"],
        ),
        in_categories(pod_def(), &["all"]),
        event(""),
        events_v1,
        ResourceDef::builtin(
            "coordination.k8s.io",
            "v1",
            "leases",
            "Lease",
            true,
            &[],
            false,
            &[],
        ),
    ]
}

/// PodDisruptionBudgets, DaemonSets and ReplicaSets.
fn workload_defs() -> Vec<ResourceDef> {
    let apps = |plural: &str, kind: &str, short: &str| {
        let def = ResourceDef::builtin("apps", "v1", plural, kind, true, &[short], true, &[]);
        in_categories(def, &["all"])
    };
    vec![
        ResourceDef::builtin(
            "policy",
            "v1",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            true,
            &["pdb"],
            true,
            &[],
        ),
        apps("daemonsets", "DaemonSet", "ds"),
        apps("replicasets", "ReplicaSet", "rs"),
    ]
}

/// CustomResourceDefinitions and the admission webhook configurations.
fn extension_defs() -> Vec<ResourceDef> {
    let webhooks = |plural: &str, kind: &str| {
        ResourceDef::builtin(
            "admissionregistration.k8s.io",
            "v1",
            plural,
            kind,
            false,
            &[],
            false,
            &[],
        )
    };
    let crd = ResourceDef::builtin(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
        &["crd", "crds"],
        true,
        &[],
    );
    vec![
        in_categories(crd, &["api-extensions"]),
        // What acts on eviction requests (the simulator calls the webhooks on pods/eviction
        // that these register, as kube-apiserver does: see `admission`).
        webhooks(
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
        ),
        webhooks(
            "mutatingwebhookconfigurations",
            "MutatingWebhookConfiguration",
        ),
    ]
}

/// The registry of served resources; CRDs add to it at run time.
#[derive(Debug)]
pub struct Registry {
    defs: RwLock<Vec<Arc<ResourceDef>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

/// Names of the built-in resources nmo and kubectl rely on, for quick access.
pub mod names {
    /// Pods.
    pub const PODS: (&str, &str) = ("", "pods");
    /// Nodes.
    pub const NODES: (&str, &str) = ("", "nodes");
    /// Namespaces.
    pub const NAMESPACES: (&str, &str) = ("", "namespaces");
    /// PodDisruptionBudgets.
    pub const PDBS: (&str, &str) = ("policy", "poddisruptionbudgets");
    /// ReplicaSets.
    pub const REPLICASETS: (&str, &str) = ("apps", "replicasets");
    /// DaemonSets.
    pub const DAEMONSETS: (&str, &str) = ("apps", "daemonsets");
    /// CRDs.
    pub const CRDS: (&str, &str) = ("apiextensions.k8s.io", "customresourcedefinitions");
    /// Leases.
    pub const LEASES: (&str, &str) = ("coordination.k8s.io", "leases");
    /// core/v1 events.
    pub const EVENTS: (&str, &str) = ("", "events");
    /// ValidatingWebhookConfigurations.
    pub const VALIDATING_WEBHOOKS: (&str, &str) = (
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
    );
}

impl Registry {
    /// The built-in resources.
    pub fn new() -> Self {
        Registry {
            defs: RwLock::new(builtins().into_iter().map(Arc::new).collect()),
        }
    }

    /// All served resources.
    pub fn all(&self) -> Vec<Arc<ResourceDef>> {
        self.defs.read().map(|d| d.clone()).unwrap_or_default()
    }

    /// Looks up group/version/plural.
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        let defs = self.defs.read().ok()?;
        defs.iter()
            .find(|d| d.group == group && d.version == version && d.plural == plural)
            .cloned()
    }

    /// Looks up group/plural (first served version).
    pub fn by_name(&self, (group, plural): (&str, &str)) -> Option<Arc<ResourceDef>> {
        let defs = self.defs.read().ok()?;
        defs.iter()
            .find(|d| d.group == group && d.plural == plural)
            .cloned()
    }

    /// Looks up by apiVersion and kind (for owner references).
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceDef>> {
        let defs = self.defs.read().ok()?;
        defs.iter()
            .find(|d| d.api_version() == api_version && d.kind == kind)
            .cloned()
    }

    /// Groups and their versions, in registration order.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for d in self.all() {
            if d.group.is_empty() {
                continue;
            }
            match out.iter_mut().find(|(g, _)| *g == d.group) {
                Some((_, vs)) => {
                    if !vs.contains(&d.version) {
                        vs.push(d.version.clone())
                    }
                }
                None => out.push((d.group.clone(), vec![d.version.clone()])),
            }
        }
        out
    }

    /// Registers (or re-registers) the served versions of a CRD; returns the defs.
    pub fn register_crd(&self, crd: &Value) -> Result<Vec<Arc<ResourceDef>>, SimError> {
        let defs = defs_from_crd(crd)?;
        let mut all = self
            .defs
            .write()
            .map_err(|_| SimError::Config("registry lock poisoned".into()))?;
        if let Some(first) = defs.first() {
            let (g, p) = (first.group.clone(), first.plural.clone());
            all.retain(|d| !(d.group == g && d.plural == p));
        }
        let arcs: Vec<Arc<ResourceDef>> = defs.into_iter().map(Arc::new).collect();
        all.extend(arcs.iter().cloned());
        Ok(arcs)
    }

    /// Unregisters a CRD's resources.
    pub fn unregister(&self, group: &str, plural: &str) {
        if let Ok(mut all) = self.defs.write() {
            all.retain(|d| !(d.custom && d.group == group && d.plural == plural));
        }
    }
}

fn s(v: &Value, path: &str) -> Option<String> {
    v.pointer(path)
        .and_then(|x| x.as_str())
        .map(|x| x.to_string())
}

fn strings(v: &Value, path: &str) -> Vec<String> {
    v.pointer(path)
        .and_then(|x| x.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The resource definitions (one per served version) of a CRD object.
pub fn defs_from_crd(crd: &Value) -> Result<Vec<ResourceDef>, SimError> {
    let bad = |what: &str| SimError::Config(format!("CRD without {what}"));
    let group = s(crd, "/spec/group").ok_or_else(|| bad("spec.group"))?;
    let plural = s(crd, "/spec/names/plural").ok_or_else(|| bad("spec.names.plural"))?;
    let kind = s(crd, "/spec/names/kind").ok_or_else(|| bad("spec.names.kind"))?;
    let singular = s(crd, "/spec/names/singular").unwrap_or_else(|| kind.to_lowercase());
    let list_kind = s(crd, "/spec/names/listKind").unwrap_or_else(|| format!("{kind}List"));
    let namespaced = s(crd, "/spec/scope").as_deref() != Some("Cluster");
    let versions = crd
        .pointer("/spec/versions")
        .and_then(|v| v.as_array())
        .ok_or_else(|| bad("spec.versions"))?;
    let mut out = Vec::new();
    for v in versions {
        if v.get("served").and_then(|x| x.as_bool()) == Some(false) {
            continue;
        }
        let version = s(v, "/name").ok_or_else(|| bad("spec.versions[].name"))?;
        let fields = v
            .get("selectableFields")
            .and_then(|x| x.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.get("jsonPath").and_then(|p| p.as_str()))
                    .map(|p| p.trim_start_matches('.').to_string())
                    .collect()
            })
            .unwrap_or_default();
        out.push(ResourceDef {
            group: group.clone(),
            version,
            plural: plural.clone(),
            singular: singular.clone(),
            kind: kind.clone(),
            list_kind: list_kind.clone(),
            namespaced,
            short_names: strings(crd, "/spec/names/shortNames"),
            categories: strings(crd, "/spec/names/categories"),
            status_subresource: v.pointer("/subresources/status").is_some(),
            fields,
            indexed_field: None,
            printer_columns: v
                .get("additionalPrinterColumns")
                .and_then(|x| x.as_array())
                .cloned()
                .unwrap_or_default(),
            schema: v.pointer("/schema/openAPIV3Schema").cloned(),
            custom: true,
            converted: false,
        });
    }
    if out.is_empty() {
        return Err(bad("a served version"));
    }
    Ok(out)
}

/// The status the apiextensions controller gives an accepted CRD.
pub fn crd_status(crd: &Value, now: &str) -> Value {
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let stored: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter(|v| v.get("storage").and_then(|x| x.as_bool()) == Some(true))
                .filter_map(|v| v.get("name").cloned())
                .collect()
        })
        .unwrap_or_default();
    json!({
        "acceptedNames": names,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now}
        ],
        "storedVersions": stored,
    })
}

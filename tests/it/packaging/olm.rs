//! The OLM bundle (bundle/, registry+v1 as operator-sdk lays it out), generated from deploy/ and
//! checked three ways: against the ClusterServiceVersion schema (the fields OLM reads, typed,
//! unknown fields refused), against deploy/ object by object (the install strategy's
//! Deployment and RBAC, the webhook, the owned CRD), and for drift from what the generator
//! makes of deploy/ now.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::{Value, json};

use super::release::how_to_regenerate;
use super::support::{build, check_generated, documents, find, find_all, regenerating, repo};

// The ClusterServiceVersion's schema, as far as nmo's CSV uses it (operator-framework/api,
// operators/v1alpha1, clusterserviceversion_types.go): a misspelt or misplaced field fails to
// load instead of being ignored by OLM.

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ClusterServiceVersion {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    spec: CsvSpec,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CsvSpec {
    display_name: String,
    description: String,
    version: String,
    min_kube_version: String,
    maturity: String,
    provider: Provider,
    maintainers: Vec<Maintainer>,
    icon: Vec<Icon>,
    keywords: Vec<String>,
    links: Vec<Link>,
    install_modes: Vec<InstallMode>,
    customresourcedefinitions: CustomResourceDefinitions,
    install: Install,
    webhookdefinitions: Vec<WebhookDefinition>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Provider {
    name: String,
    url: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Maintainer {
    name: String,
    email: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Icon {
    base64data: String,
    mediatype: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Link {
    name: String,
    url: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InstallMode {
    #[serde(rename = "type")]
    type_: String,
    supported: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CustomResourceDefinitions {
    owned: Vec<OwnedCrd>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct OwnedCrd {
    name: String,
    version: String,
    kind: String,
    display_name: String,
    description: String,
    spec_descriptors: Vec<Descriptor>,
    status_descriptors: Vec<Descriptor>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Descriptor {
    path: String,
    display_name: String,
    description: String,
    #[serde(default, rename = "x-descriptors")]
    x_descriptors: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Install {
    strategy: String,
    spec: InstallSpec,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct InstallSpec {
    deployments: Vec<DeploymentSpecEntry>,
    permissions: Vec<Permission>,
    cluster_permissions: Vec<Permission>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeploymentSpecEntry {
    name: String,
    label: BTreeMap<String, String>,
    spec: DeploymentSpec,
}

#[derive(Deserialize, Clone, PartialEq, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Permission {
    service_account_name: String,
    rules: Vec<PolicyRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WebhookDefinition {
    #[serde(rename = "type")]
    type_: String,
    generate_name: String,
    deployment_name: String,
    container_port: i32,
    target_port: i32,
    webhook_path: String,
    admission_review_versions: Vec<String>,
    side_effects: String,
    failure_policy: String,
    timeout_seconds: i32,
    rules: Vec<RuleWithOperations>,
}

const CSV: &str = "bundle/manifests/nmo.clusterserviceversion.yaml";
const CSV_BASE: &str = "deploy/olm/nmo.clusterserviceversion.yaml";
const ICON: &str = "deploy/olm/icon.svg";

/// Everything but the CSV that OLM installs from the bundle: the kinds a registry+v1 bundle may
/// carry, without a namespace (OLM puts them in the operator's). The Namespace, the service
/// account, the RBAC and the webhook's Service and certificate are OLM's own doing.
const EXTRA_KINDS: &[&str] = &["Service", "PodDisruptionBudget"];

fn rules_of(role: &Value) -> Vec<Value> {
    role["rules"].as_array().expect("rules").clone()
}

fn yaml(value: &Value) -> String {
    serde_yaml::to_string(value).expect("serializable")
}

/// operator-sdk's file name for a bundle manifest: name_group_version_kind.yaml.
fn file_name(object: &Value) -> String {
    let api_version = object["apiVersion"].as_str().expect("apiVersion");
    let group_version = api_version.replace('/', "_");
    format!(
        "{}_{group_version}_{}.yaml",
        object["metadata"]["name"].as_str().expect("name"),
        object["kind"].as_str().expect("kind").to_lowercase()
    )
}

/// operator-sdk's file name for a CRD: group_plural.yaml.
fn crd_file_name(crd: &Value) -> String {
    format!(
        "{}_{}.yaml",
        crd["spec"]["group"].as_str().expect("group"),
        crd["spec"]["names"]["plural"].as_str().expect("plural")
    )
}

/// The bundle's files (path below the repository root, content) made from deploy/.
fn generate() -> Vec<(String, String)> {
    let base = build("base");
    let webhook_objects = build("webhook");
    let deployment = find(&base, "Deployment", "nmo");
    let account = deployment["spec"]["template"]["spec"]["serviceAccountName"].clone();
    let own_namespace = &deployment["metadata"]["namespace"];
    let cluster_role = find(&base, "ClusterRole", "nmo-manager");

    // OLM creates `permissions` as Roles in the operator's namespace only, so the lease Role of
    // medik8s-leases becomes cluster-wide lease rights under OLM (as the Go operator's CSV has).
    let (own_roles, other_roles): (Vec<&Value>, Vec<&Value>) = find_all(&base, "Role")
        .into_iter()
        .partition(|r| &r["metadata"]["namespace"] == own_namespace);
    let permissions: Vec<Value> = own_roles.iter().flat_map(|r| rules_of(r)).collect();
    let mut cluster_rules = rules_of(cluster_role);
    // Secure metrics' TokenReviews and SubjectAccessReviews.
    cluster_rules.extend(rules_of(find(&base, "ClusterRole", "nmo-metrics-auth")));
    cluster_rules.extend(other_roles.iter().flat_map(|r| rules_of(r)));

    let configuration = find(
        &webhook_objects,
        "ValidatingWebhookConfiguration",
        "nmo-validating-webhook",
    );
    let service = find(&webhook_objects, "Service", "nmo-webhook");
    let webhookdefinitions: Vec<Value> = configuration["webhooks"]
        .as_array()
        .expect("webhooks")
        .iter()
        .map(|w| {
            json!({
                "type": "ValidatingAdmissionWebhook",
                "generateName": w["name"],
                "deploymentName": deployment["metadata"]["name"],
                "containerPort": w["clientConfig"]["service"]["port"],
                "targetPort": service["spec"]["ports"][0]["targetPort"],
                "webhookPath": w["clientConfig"]["service"]["path"],
                "admissionReviewVersions": w["admissionReviewVersions"],
                "sideEffects": w["sideEffects"],
                // OLM provides the certificate before the webhook is registered: the policy nmo
                // would set once its own certificate is trusted holds from the start.
                "failurePolicy": configuration["metadata"]["annotations"]
                    [nmo::serving_cert::FAILURE_POLICY_ANNOTATION]
                    .as_str()
                    .map_or_else(|| w["failurePolicy"].clone(), Value::from),
                "timeoutSeconds": w["timeoutSeconds"],
                "rules": w["rules"],
            })
        })
        .collect();

    let crd = find_all(&base, "CustomResourceDefinition")
        .into_iter()
        .next()
        .expect("the CRD")
        .clone();
    let storage = crd["spec"]["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .find(|v| v["storage"] == true)
        .expect("a storage version")["name"]
        .clone();

    let text = std::fs::read_to_string(repo().join(CSV_BASE)).expect("the base CSV");
    let mut csv = documents(&text).remove(0);
    let version = env!("CARGO_PKG_VERSION");
    let image = deployment["spec"]["template"]["spec"]["containers"][0]["image"].clone();
    let samples = build("samples");
    csv["metadata"]["name"] = json!(format!("nmo.v{version}"));
    csv["metadata"]["annotations"]["containerImage"] = image;
    csv["metadata"]["annotations"]["alm-examples"] =
        json!(serde_json::to_string_pretty(&samples).expect("JSON"));
    csv["spec"]["version"] = json!(version);
    let icon = std::fs::read(repo().join(ICON)).expect("the icon");
    csv["spec"]["icon"] = json!([{
        "base64data": serde_json::to_value(k8s_openapi::ByteString(icon)).expect("base64"),
        "mediatype": "image/svg+xml",
    }]);
    for owned in csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array_mut()
        .expect("owned CRDs")
    {
        assert_eq!(owned["kind"], crd["spec"]["names"]["kind"]);
        owned["name"] = crd["metadata"]["name"].clone();
        owned["version"] = storage.clone();
    }
    csv["spec"]["install"] = json!({
        "strategy": "deployment",
        "spec": {
            "deployments": [{
                "name": deployment["metadata"]["name"],
                "label": deployment["metadata"]["labels"],
                "spec": deployment["spec"],
            }],
            "permissions": [{"serviceAccountName": account, "rules": permissions}],
            "clusterPermissions": [{"serviceAccountName": account, "rules": cluster_rules}],
        }
    });
    csv["spec"]["webhookdefinitions"] = json!(webhookdefinitions);

    let header = |from: &str| {
        format!(
            "# Generated from {from}: do not edit;\n# {}.\n",
            how_to_regenerate()
        )
    };
    let mut files = vec![(
        CSV.to_string(),
        format!(
            "{}{}",
            header(&format!("{CSV_BASE} and deploy/")),
            yaml(&csv)
        ),
    )];
    files.push((
        format!("bundle/manifests/{}", crd_file_name(&crd)),
        format!("{}{}", header("deploy/base/crd.yaml"), yaml(&crd)),
    ));
    // Who may read the metrics: bound by the cluster's admin to its Prometheus, not to nmo.
    let metrics_reader = find(&base, "ClusterRole", "nmo-metrics-reader");
    for object in base
        .iter()
        .filter(|o| EXTRA_KINDS.contains(&o["kind"].as_str().unwrap_or_default()))
        .chain([metrics_reader])
    {
        let mut object = object.clone();
        if let Some(metadata) = object["metadata"].as_object_mut() {
            metadata.remove("namespace");
        }
        files.push((
            format!("bundle/manifests/{}", file_name(&object)),
            format!("{}{}", header("deploy/base"), yaml(&object)),
        ));
    }
    files
}

#[test]
fn generated_bundle_is_what_deploy_generates() {
    let files = generate();
    let manifests = repo().join("bundle/manifests");
    if regenerating() && manifests.exists() {
        for entry in std::fs::read_dir(&manifests).expect("readable") {
            std::fs::remove_file(entry.expect("entry").path()).expect("removable");
        }
    }
    for (path, content) in &files {
        check_generated(path, content, &how_to_regenerate());
    }
    // Nothing left over from an earlier generation.
    let mut on_disk: Vec<String> = std::fs::read_dir(&manifests)
        .expect("bundle/manifests")
        .map(|e| {
            format!(
                "bundle/manifests/{}",
                e.expect("entry").file_name().to_string_lossy()
            )
        })
        .collect();
    on_disk.sort();
    let mut expected: Vec<String> = files.into_iter().map(|(p, _)| p).collect();
    expected.sort();
    assert_eq!(on_disk, expected, "{}", how_to_regenerate());
}

fn bundle_csv() -> (Value, ClusterServiceVersion) {
    let text = std::fs::read_to_string(repo().join(CSV)).expect("the bundle's CSV");
    let value = documents(&text).remove(0);
    let typed: ClusterServiceVersion = serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("{CSV} does not match the CSV schema: {e}"));
    (value, typed)
}

#[test]
fn the_csv_has_what_olm_requires() {
    let (_, csv) = bundle_csv();
    assert_eq!(csv.api_version, "operators.coreos.com/v1alpha1");
    assert_eq!(csv.kind, "ClusterServiceVersion");
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        csv.metadata.name.as_deref(),
        Some(format!("nmo.v{version}").as_str())
    );
    assert_eq!(csv.spec.version, version);
    for text in [
        &csv.spec.display_name,
        &csv.spec.description,
        &csv.spec.provider.name,
    ] {
        assert!(!text.trim().is_empty());
    }
    assert!(
        [
            "planning",
            "pre-alpha",
            "alpha",
            "beta",
            "stable",
            "mature",
            "inactive",
            "deprecated"
        ]
        .contains(&csv.spec.maturity.as_str())
    );
    assert!(csv.spec.min_kube_version.split('.').count() == 3);
    assert!(!csv.spec.keywords.is_empty());
    assert!(
        csv.spec
            .links
            .iter()
            .all(|l| !l.name.is_empty() && l.url.starts_with("https://"))
    );
    // Each install mode said once; nmo works cluster wide only (cluster-scoped NodeMaintenances,
    // pods of every namespace).
    let modes: BTreeMap<&str, bool> = csv
        .spec
        .install_modes
        .iter()
        .map(|m| (m.type_.as_str(), m.supported))
        .collect();
    assert_eq!(csv.spec.install_modes.len(), 4);
    assert_eq!(
        modes,
        BTreeMap::from([
            ("AllNamespaces", true),
            ("MultiNamespace", false),
            ("OwnNamespace", false),
            ("SingleNamespace", false),
        ])
    );
    assert_eq!(csv.spec.install.strategy, "deployment");
    let annotations = csv.metadata.annotations.unwrap_or_default();
    for key in [
        "alm-examples",
        "capabilities",
        "categories",
        "containerImage",
        "description",
    ] {
        assert!(
            annotations.get(key).is_some_and(|v| !v.is_empty()),
            "no {key}"
        );
    }
    // alm-examples is JSON of objects of the owned kinds.
    let examples: Vec<Value> =
        serde_json::from_str(&annotations["alm-examples"]).expect("alm-examples is JSON");
    assert!(!examples.is_empty());
    for example in &examples {
        assert!(
            csv.spec
                .customresourcedefinitions
                .owned
                .iter()
                .any(|o| example["kind"] == o.kind.as_str())
        );
    }
    for owned in &csv.spec.customresourcedefinitions.owned {
        assert!(!owned.display_name.is_empty() && !owned.description.is_empty());
        for d in owned
            .spec_descriptors
            .iter()
            .chain(&owned.status_descriptors)
        {
            assert!(!d.path.is_empty() && !d.display_name.is_empty() && !d.description.is_empty());
            assert!(
                d.x_descriptors
                    .iter()
                    .all(|x| x.starts_with("urn:alm:descriptor:"))
            );
        }
    }
}

#[test]
fn the_csv_installs_what_deploy_installs() {
    let (value, csv) = bundle_csv();
    let base = build("base");
    let deployment = find(&base, "Deployment", "nmo");

    // The Deployment, exactly.
    let [entry] = &csv.spec.install.spec.deployments[..] else {
        panic!("one deployment expected");
    };
    assert_eq!(entry.name, "nmo");
    assert_eq!(
        value["spec"]["install"]["spec"]["deployments"][0]["spec"],
        deployment["spec"]
    );
    assert_eq!(
        serde_json::to_value(&entry.label).expect("labels"),
        deployment["metadata"]["labels"]
    );
    let account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .expect("account");
    // The typed spec loaded (the schema check) and runs as the permissions' account.
    let pod = entry.spec.template.spec.as_ref().expect("a pod spec");
    assert_eq!(pod.service_account_name.as_deref(), Some(account));
    assert_eq!(
        value["metadata"]["annotations"]["containerImage"],
        deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    );
    let tag = value["metadata"]["annotations"]["containerImage"]
        .as_str()
        .expect("image")
        .rsplit(':')
        .next()
        .expect("a tag")
        .to_string();
    assert_eq!(
        tag,
        env!("CARGO_PKG_VERSION"),
        "the image tag is not the crate's version"
    );

    // The RBAC: the leader-election Role of nmo's namespace as `permissions`; the ClusterRole,
    // plus the lease Role of medik8s-leases (OLM creates Roles only in the operator's
    // namespace), as `clusterPermissions`.
    let typed_rules = |v: Vec<Value>| -> Vec<PolicyRule> {
        v.into_iter()
            .map(|r| serde_json::from_value(r).expect("a rule"))
            .collect()
    };
    let own_namespace = &deployment["metadata"]["namespace"];
    let roles = find_all(&base, "Role");
    let own: Vec<Value> = roles
        .iter()
        .filter(|r| &r["metadata"]["namespace"] == own_namespace)
        .flat_map(|r| rules_of(r))
        .collect();
    // Roles of other namespaces (the node leases', default's events), in the order deploy/ has
    // them: OLM makes them cluster wide.
    let leases: Vec<Value> = roles
        .iter()
        .filter(|r| &r["metadata"]["namespace"] != own_namespace)
        .flat_map(|r| rules_of(r))
        .collect();
    assert!(!leases.is_empty() && !own.is_empty());
    let mut cluster = rules_of(find(&base, "ClusterRole", "nmo-manager"));
    cluster.extend(rules_of(find(&base, "ClusterRole", "nmo-metrics-auth")));
    cluster.extend(leases);
    assert_eq!(
        csv.spec.install.spec.permissions,
        vec![Permission {
            service_account_name: account.to_string(),
            rules: typed_rules(own)
        }]
    );
    assert_eq!(
        csv.spec.install.spec.cluster_permissions,
        vec![Permission {
            service_account_name: account.to_string(),
            rules: typed_rules(cluster)
        }]
    );

    // The webhook, as deploy/webhook configures it.
    let webhook_objects = build("webhook");
    let configuration = find(
        &webhook_objects,
        "ValidatingWebhookConfiguration",
        "nmo-validating-webhook",
    );
    let service = find(&webhook_objects, "Service", "nmo-webhook");
    let [definition] = &csv.spec.webhookdefinitions[..] else {
        panic!("one webhook expected");
    };
    let webhook = &configuration["webhooks"][0];
    assert_eq!(definition.type_, "ValidatingAdmissionWebhook");
    assert_eq!(definition.generate_name, webhook["name"]);
    assert_eq!(definition.deployment_name, "nmo");
    assert_eq!(
        definition.container_port,
        webhook["clientConfig"]["service"]["port"]
    );
    assert_eq!(
        definition.target_port,
        service["spec"]["ports"][0]["targetPort"]
    );
    assert_eq!(
        definition.webhook_path,
        webhook["clientConfig"]["service"]["path"]
    );
    assert_eq!(
        definition.admission_review_versions,
        serde_json::from_value::<Vec<String>>(webhook["admissionReviewVersions"].clone())
            .expect("versions")
    );
    assert_eq!(definition.side_effects, webhook["sideEffects"]);
    // OLM registers the webhook with its certificate in place: fail closed from the start,
    // the policy nmo turns deploy/'s webhook to once its own certificate is trusted.
    assert_eq!(
        definition.failure_policy,
        configuration["metadata"]["annotations"][nmo::serving_cert::FAILURE_POLICY_ANNOTATION]
    );
    assert_eq!(definition.failure_policy, "Fail");
    assert_eq!(definition.timeout_seconds, webhook["timeoutSeconds"]);
    assert_eq!(
        definition.rules,
        serde_json::from_value::<Vec<RuleWithOperations>>(webhook["rules"].clone()).expect("rules")
    );
    // nmo reads OLM's certificate where OLM mounts it: its default --webhook-cert-dir.
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args");
    assert!(
        !args
            .iter()
            .any(|a| a.as_str().unwrap_or("").starts_with("--webhook"))
    );

    // The owned CRD: deploy/base/crd.yaml, named and versioned as it is.
    let crd = find_all(&base, "CustomResourceDefinition")[0];
    let [owned] = &csv.spec.customresourcedefinitions.owned[..] else {
        panic!("one owned CRD expected");
    };
    assert_eq!(owned.name, crd["metadata"]["name"]);
    assert_eq!(owned.kind, crd["spec"]["names"]["kind"]);
    assert_eq!(owned.version, crd["spec"]["versions"][0]["name"]);
    let text = std::fs::read_to_string(repo().join("bundle/manifests").join(crd_file_name(crd)))
        .expect("the bundle's CRD");
    assert_eq!(&documents(&text).remove(0), crd);
    // Every descriptor names a field of the CRD's schema.
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
    for (part, descriptors) in [
        ("spec", &owned.spec_descriptors),
        ("status", &owned.status_descriptors),
    ] {
        for d in descriptors {
            assert!(
                !schema[part]["properties"][&d.path].is_null(),
                "{part} descriptor {} names no field",
                d.path
            );
        }
    }
}

#[test]
fn the_bundle_metadata_and_its_image_labels_agree() {
    #[derive(Deserialize)]
    struct Metadata {
        annotations: BTreeMap<String, String>,
    }
    let text = std::fs::read_to_string(repo().join("bundle/metadata/annotations.yaml"))
        .expect("annotations.yaml");
    let metadata: Metadata = serde_yaml::from_str(&text).expect("annotations parse");
    let a = &metadata.annotations;
    let key = |k: &str| {
        a.get(&format!("operators.operatorframework.io.bundle.{k}"))
            .cloned()
    };
    assert_eq!(key("mediatype.v1").as_deref(), Some("registry+v1"));
    assert_eq!(key("manifests.v1").as_deref(), Some("manifests/"));
    assert_eq!(key("metadata.v1").as_deref(), Some("metadata/"));
    assert_eq!(key("package.v1").as_deref(), Some("nmo"));
    let default = key("channel.default.v1").expect("a default channel");
    // The Go operator's channel, so that a Subscription moved from it keeps working.
    assert_eq!(default, "stable");
    assert!(
        key("channels.v1")
            .expect("channels")
            .split(',')
            .any(|c| c == default)
    );

    // bundle.Dockerfile: the same values as LABELs, and the two directories copied.
    let dockerfile = std::fs::read_to_string(repo().join("bundle.Dockerfile")).expect("readable");
    let joined = dockerfile.replace("\\\n", " ");
    let labels: BTreeMap<String, String> = joined
        .lines()
        .filter_map(|l| l.trim().strip_prefix("LABEL "))
        .flat_map(|l| l.split_whitespace())
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(&labels, a);
    assert!(dockerfile.contains("COPY bundle/manifests /manifests/"));
    assert!(dockerfile.contains("COPY bundle/metadata /metadata/"));
}

/// What OperatorHub shows and its validation asks for beyond OLM's needs: an icon that decodes
/// to the image it says it is, a maintainer to reach, a provider and links, a maturity other
/// than alpha, the minimum Kubernetes version, and the Go operator's install modes (cluster
/// wide only: NodeMaintenances are cluster scoped and pods of every namespace are drained).
#[test]
fn the_csv_has_what_operatorhub_shows() {
    let (_, csv) = bundle_csv();
    assert_eq!(csv.spec.icon.len(), 1);
    let icon = &csv.spec.icon[0];
    assert_eq!(icon.mediatype, "image/svg+xml");
    let decoded: k8s_openapi::ByteString =
        serde_json::from_value(Value::from(icon.base64data.clone())).expect("base64");
    let svg = String::from_utf8(decoded.0).expect("UTF-8");
    assert!(svg.trim_start().starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(
        svg,
        std::fs::read_to_string(repo().join(ICON)).expect("the icon")
    );
    assert!(!csv.spec.maintainers.is_empty());
    for maintainer in &csv.spec.maintainers {
        assert!(!maintainer.name.trim().is_empty());
        let (user, domain) = maintainer.email.split_once('@').expect("an e-mail address");
        assert!(
            !user.is_empty() && domain.contains('.'),
            "{}",
            maintainer.email
        );
    }
    assert!(csv.spec.provider.url.starts_with("https://"));
    assert!(csv.spec.links.len() >= 2, "source and documentation links");
    assert_ne!(csv.spec.maturity, "alpha");
    let parts: Vec<u32> = csv
        .spec
        .min_kube_version
        .split('.')
        .map(|p| p.parse().expect("a number"))
        .collect();
    assert_eq!(parts.len(), 3);
    assert!(
        parts[0] == 1 && parts[1] >= 23,
        "at least the Go operator's minimum"
    );
    let supported: Vec<&str> = csv
        .spec
        .install_modes
        .iter()
        .filter(|m| m.supported)
        .map(|m| m.type_.as_str())
        .collect();
    assert_eq!(supported, ["AllNamespaces"]);
}

//! Every kustomize entry point and component of deploy/ builds with `kubectl kustomize`, and
//! what it builds is valid (each object against its typed Kubernetes struct, as
//! tests/it/manifests.rs does for the files) and wired together: the webhook to its certificate,
//! the RBAC to the Deployment, nmo's placement, the shared lease namespace left alone.

use std::path::Path;

use serde_json::Value;

use super::support::{build, build_overlay, find, find_all, kind_of, repo};
use crate::manifests::check_document;

/// Every entry point (a directory of deploy/ with a kustomization.yaml that is a Kustomization,
/// not a Component) but deploy/base, which is not installable alone (its webhook needs a
/// certificate); it is built through all the others.
const ENTRY_POINTS: &[&str] = &[
    "",
    "install",
    "install-no-webhook",
    "no-webhook",
    "observability",
    "lease-namespace",
    "samples",
    "default",
    "webhook",
    "cert-manager",
];

/// The components that add objects (each is checked to add some).
const COMPONENTS: &[&str] = &[
    "cert-manager",
    "webhook-cert",
    "monitoring",
    "gke-critical-pods",
    "flow-control",
];

/// The components that only change what is there (lease-namespace_follows_lease_namespace).
const TRANSFORMING_COMPONENTS: &[&str] = &["lease-namespace"];

fn assert_valid(label: &str, objects: &[Value]) {
    assert!(!objects.is_empty(), "{label} builds nothing");
    let failures: Vec<String> = objects
        .iter()
        .filter_map(|o| {
            check_document(o)
                .err()
                .map(|e| format!("{label}: {:?}: {e}", kind_of(o)))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The kustomization.yaml files under deploy/, by directory relative to deploy/, and whether
/// each is a Component.
fn kustomizations() -> Vec<(String, bool)> {
    let deploy = repo().join("deploy");
    let mut found = Vec::new();
    let mut pending = vec![deploy.clone()];
    while let Some(dir) = pending.pop() {
        let file = dir.join("kustomization.yaml");
        if file.exists() {
            let text = std::fs::read_to_string(&file).expect("readable");
            let relative = dir
                .strip_prefix(&deploy)
                .expect("below deploy/")
                .to_string_lossy()
                .into_owned();
            found.push((relative, text.contains("\nkind: Component")));
        }
        for entry in std::fs::read_dir(&dir).expect("readable") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            }
        }
    }
    found.sort();
    found
}

#[test]
fn every_entry_point_and_component_is_listed_here() {
    for (dir, is_component) in kustomizations() {
        let known = if is_component {
            dir.strip_prefix("components/").is_some_and(|name| {
                COMPONENTS.contains(&name) || TRANSFORMING_COMPONENTS.contains(&name)
            })
        } else {
            dir == "base" || ENTRY_POINTS.contains(&dir.as_str())
        };
        assert!(
            known,
            "deploy/{dir} is not built by these tests: add it to ENTRY_POINTS or COMPONENTS"
        );
    }
}

#[test]
fn every_entry_point_builds_valid_objects() {
    for entry_point in ENTRY_POINTS {
        assert_valid(&format!("deploy/{entry_point}"), &build(entry_point));
    }
}

#[test]
fn every_component_builds_valid_objects_on_top_of_nmo() {
    for component in COMPONENTS {
        let objects = build_overlay(
            &["deploy/base", "deploy/webhook"],
            &[&format!("deploy/components/{component}")],
        );
        assert_valid(&format!("deploy/components/{component}"), &objects);
        // The component added something of its own.
        let base = build_overlay(&["deploy/base", "deploy/webhook"], &[]);
        assert!(objects.len() > base.len(), "{component} adds no object");
    }
}

fn deployment(objects: &[Value]) -> &Value {
    find(objects, "Deployment", "nmo")
}

fn args(objects: &[Value]) -> Vec<String> {
    deployment(objects)["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string").to_string())
        .collect()
}

fn env(objects: &[Value], name: &str) -> Option<String> {
    deployment(objects)["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_str().map(str::to_string))
}

fn has(objects: &[Value], kind: &str, name: &str) -> bool {
    objects.iter().any(|o| kind_of(o) == (kind, name))
}

#[test]
fn deploy_and_its_uninstall_leave_the_shared_lease_namespace_alone() {
    // `kubectl delete -k deploy/` deletes exactly what deploy/ builds.
    let deploy = build("");
    assert!(
        !has(&deploy, "Namespace", "medik8s-leases"),
        "deploy/ must not own the lease namespace the other medik8s operators share"
    );
    let lease_namespace = env(&deploy, "LEASE_NAMESPACE").expect("LEASE_NAMESPACE is set");
    assert_eq!(lease_namespace, "medik8s-leases");
    // A first install creates it: install.yaml's build has it, marked for GitOps tools to keep,
    // and apart from it exactly what the matching uninstall deletes.
    for (install, uninstall) in [("install", ""), ("install-no-webhook", "no-webhook")] {
        let uninstalled = build(uninstall);
        assert!(!has(&uninstalled, "Namespace", &lease_namespace));
        let install = build(install);
        let namespace = find(&install, "Namespace", &lease_namespace);
        let annotations = &namespace["metadata"]["annotations"];
        assert_eq!(
            annotations["argocd.argoproj.io/sync-options"],
            "Delete=false"
        );
        assert_eq!(annotations["kustomize.toolkit.fluxcd.io/prune"], "disabled");
        assert_eq!(annotations["helm.sh/resource-policy"], "keep");
        let rest: Vec<&Value> = install.iter().filter(|o| *o != namespace).collect();
        assert_eq!(rest.len(), uninstalled.len());
        assert!(uninstalled.iter().all(|o| rest.contains(&o)));
    }
}

#[test]
fn leases_are_granted_only_in_their_two_namespaces() {
    let objects = build("");
    let own_namespace = deployment(&objects)["metadata"]["namespace"]
        .as_str()
        .expect("ns")
        .to_string();
    let lease_namespace = env(&objects, "LEASE_NAMESPACE").expect("LEASE_NAMESPACE");
    let mut expected = vec![own_namespace, lease_namespace];
    expected.sort();
    assert_eq!(
        role_namespaces_granting(&objects, "coordination.k8s.io"),
        expected
    );
}

/// The webhook configuration and the Service it calls, checked to fit together.
fn webhook_and_service(objects: &[Value]) -> (&Value, &Value) {
    let webhook = find(
        objects,
        "ValidatingWebhookConfiguration",
        "nmo-validating-webhook",
    );
    let client = &webhook["webhooks"][0]["clientConfig"]["service"];
    let service = find(
        objects,
        "Service",
        client["name"].as_str().expect("a service"),
    );
    assert_eq!(service["metadata"]["namespace"], client["namespace"]);
    assert_eq!(service["spec"]["ports"][0]["port"], client["port"]);
    // nmo serves on the Service's target port (no --webhook-port: its default).
    let container = &deployment(objects)["spec"]["template"]["spec"]["containers"][0];
    assert!(
        container["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .any(|p| p["containerPort"] == service["spec"]["ports"][0]["targetPort"])
    );
    assert!(!args(objects).iter().any(|a| a.starts_with("--webhook")));
    (webhook, service)
}

/// The default install needs nothing on the cluster: nmo manages its certificate in a Secret
/// it may read and replace, publishes the CA in the one webhook configuration it may patch,
/// and the webhook lets NodeMaintenances through until then (Ignore), then fails closed.
#[test]
fn deploy_has_the_webhook_with_a_certificate_nmo_manages_itself() {
    let objects = build("");
    let (webhook, service) = webhook_and_service(&objects);
    assert_eq!(webhook["webhooks"][0]["failurePolicy"], "Ignore");
    assert_eq!(
        webhook["metadata"]["annotations"][nmo::serving_cert::FAILURE_POLICY_ANNOTATION],
        "Fail"
    );
    let secret = env(&objects, "NMO_WEBHOOK_CERT_SECRET").expect("the certificate's Secret");
    let container = &deployment(&objects)["spec"]["template"]["spec"]["containers"][0];
    let pod_namespace = container["env"]
        .as_array()
        .expect("env")
        .iter()
        .find(|e| e["name"] == "POD_NAMESPACE")
        .expect("POD_NAMESPACE");
    assert_eq!(
        pod_namespace["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    for kind in ["Certificate", "Issuer"] {
        assert!(
            find_all(&objects, kind).is_empty(),
            "no cert-manager {kind}"
        );
    }
    let namespace = service["metadata"]["namespace"].as_str().expect("ns");
    let role = find(&objects, "Role", "nmo-webhook-cert");
    assert_eq!(role["metadata"]["namespace"], namespace);
    let named = role["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .find(|r| {
            r["verbs"]
                .as_array()
                .is_some_and(|v| v.contains(&"update".into()))
        })
        .expect("a rule to replace the Secret");
    assert_eq!(named["resourceNames"], serde_json::json!([secret]));
    let cluster_role = find(&objects, "ClusterRole", "nmo-webhook-cert");
    assert_eq!(
        cluster_role["rules"][0]["resourceNames"],
        serde_json::json!([webhook["metadata"]["name"]])
    );
}

#[test]
fn cert_manager_gives_the_webhook_its_certificate_as_an_option() {
    let objects = build("cert-manager");
    let (webhook, _) = webhook_and_service(&objects);
    let client = &webhook["webhooks"][0]["clientConfig"]["service"];
    assert_eq!(webhook["webhooks"][0]["failurePolicy"], "Fail");
    assert!(env(&objects, "NMO_WEBHOOK_CERT_SECRET").is_none());
    assert!(!has(&objects, "Role", "nmo-webhook-cert"));
    let certificate = find(&objects, "Certificate", "nmo-webhook");
    let inject = format!(
        "{}/{}",
        certificate["metadata"]["namespace"].as_str().expect("ns"),
        certificate["metadata"]["name"].as_str().expect("name")
    );
    assert_eq!(
        webhook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        inject.as_str()
    );
    let dns = format!(
        "{}.{}.svc",
        client["name"].as_str().expect("name"),
        client["namespace"].as_str().expect("ns")
    );
    assert!(
        certificate["spec"]["dnsNames"]
            .as_array()
            .expect("dnsNames")
            .contains(&Value::from(dns.clone())),
        "the certificate does not cover {dns}"
    );
    // nmo reads the certificate's secret where it looks by default (no --webhook-cert-dir).
    let pod = &deployment(&objects)["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let volume = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["secret"]["secretName"] == certificate["spec"]["secretName"])
        .expect("the certificate's secret is mounted");
    let mount = container["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .find(|m| m["name"] == volume["name"])
        .expect("mounted");
    assert_eq!(mount["mountPath"], "/apiserver.local.config/certificates");
}

/// The namespaces in which a Role bound to nmo's service account grants something of
/// `group`; panics on a ClusterRole that grants it.
/// The one cluster-wide lease grant: the LIST of the Go operator's leader election lease by
/// its name (nmo looks for it in every namespace), nothing else.
fn lists_the_go_operator_s_election(rule: &Value) -> bool {
    rule["resources"] == serde_json::json!(["leases"])
        && rule["resourceNames"] == serde_json::json!([nmo::leader::LEADER_ELECTION_ID])
        && rule["verbs"] == serde_json::json!(["list"])
}

fn role_namespaces_granting(objects: &[Value], group: &str) -> Vec<String> {
    let deployment = deployment(objects);
    let account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .expect("a service account");
    let own_namespace = deployment["metadata"]["namespace"].as_str().expect("ns");
    let in_group = |rule: &Value| {
        rule["apiGroups"]
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g == group || g == "*"))
    };
    let grants = |role: &Value| role["rules"].as_array().into_iter().flatten().any(in_group);
    for role in find_all(objects, "ClusterRole") {
        let wide: Vec<&Value> = role["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|rule| in_group(rule) && !lists_the_go_operator_s_election(rule))
            .collect();
        assert!(
            wide.is_empty(),
            "{:?} grants {group} cluster wide: {wide:?}",
            kind_of(role)
        );
    }
    let mut namespaces: Vec<String> = find_all(objects, "Role")
        .into_iter()
        .filter(|role| grants(role))
        .map(|role| {
            let namespace = role["metadata"]["namespace"].as_str().expect("ns");
            let name = role["metadata"]["name"].as_str().expect("name");
            let bound = find_all(objects, "RoleBinding").into_iter().any(|b| {
                b["metadata"]["namespace"] == namespace
                    && b["roleRef"]["kind"] == "Role"
                    && b["roleRef"]["name"] == name
                    && b["subjects"].as_array().into_iter().flatten().any(|s| {
                        s["kind"] == "ServiceAccount"
                            && s["name"] == account
                            && s["namespace"] == own_namespace
                    })
            });
            assert!(bound, "Role {namespace}/{name} is not bound to nmo");
            namespace.to_string()
        })
        .collect();
    namespaces.sort();
    namespaces
}

/// Events of cluster-scoped objects go to `default`, the only namespace nmo writes them in.
#[test]
fn events_are_granted_only_in_the_default_namespace() {
    for entry_point in ["", "install", "no-webhook", "cert-manager"] {
        assert_eq!(
            role_namespaces_granting(&build(entry_point), "events.k8s.io"),
            ["default"],
            "deploy/{entry_point}"
        );
    }
}

/// A LEASE_NAMESPACE set below the component takes the lease Role (and the install's lease
/// namespace) with it.
#[test]
fn the_lease_namespace_component_moves_the_lease_role_with_lease_namespace() {
    let below = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a directory");
    let up = super::support::relative_to_repo(below.path());
    let text = format!(
        "resources: [{}]\npatches:\n  - patch: |-\n      apiVersion: apps/v1\n      kind: Deployment\n      metadata: {{name: nmo, namespace: nmo-system}}\n      spec: {{template: {{spec: {{containers: [{{name: manager, env: [{{name: LEASE_NAMESPACE, value: my-leases}}]}}]}}}}}}\n",
        up.join("deploy/install").display()
    );
    std::fs::write(below.path().join("kustomization.yaml"), text).expect("writable");
    let relative_below = below
        .path()
        .strip_prefix(repo().canonicalize().expect("repo"))
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| below.path().to_path_buf());
    let objects = build_overlay(
        &[&relative_below.to_string_lossy()],
        &["deploy/components/lease-namespace"],
    );
    let mut expected = vec!["my-leases".to_string(), "nmo-system".to_string()];
    expected.sort();
    assert_eq!(
        role_namespaces_granting(&objects, "coordination.k8s.io"),
        expected
    );
    assert!(has(&objects, "Namespace", "my-leases"));
    assert!(!has(&objects, "Namespace", "medik8s-leases"));
}

#[test]
fn no_webhook_runs_nmo_without_its_webhook_or_cert_manager() {
    let objects = build("no-webhook");
    assert!(args(&objects).contains(&"--webhook-port=0".to_string()));
    for (kind, _) in objects.iter().map(kind_of) {
        assert!(
            !matches!(
                kind,
                "ValidatingWebhookConfiguration" | "Certificate" | "Issuer"
            ),
            "deploy/no-webhook has a {kind}"
        );
    }
    assert!(!has(&objects, "Service", "nmo-webhook"));
    // Everything else deploy/ has.
    for kind in [
        "CustomResourceDefinition",
        "ClusterRole",
        "PodDisruptionBudget",
    ] {
        assert!(!find_all(&objects, kind).is_empty(), "no {kind}");
    }
}

#[test]
fn observability_sends_nmo_traces_to_its_jaeger() {
    let objects = build("observability");
    let jaeger = find(&objects, "Service", "jaeger");
    let port = jaeger["spec"]["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .find(|p| p["name"] == "otlp-grpc")
        .expect("OTLP/gRPC")["port"]
        .clone();
    let endpoint = format!(
        "http://{}.{}.svc:{port}",
        jaeger["metadata"]["name"].as_str().expect("name"),
        jaeger["metadata"]["namespace"].as_str().expect("ns")
    );
    assert_eq!(
        env(&objects, "OTEL_EXPORTER_OTLP_ENDPOINT").as_deref(),
        Some(endpoint.as_str())
    );
    // And nmo as deploy/ has it, webhook included.
    assert!(has(
        &objects,
        "ValidatingWebhookConfiguration",
        "nmo-validating-webhook"
    ));
}

#[test]
fn nmo_replicas_spread_over_nodes_and_a_pdb_keeps_one_running() {
    let objects = build("");
    let deployment = deployment(&objects);
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"], 2);
    let pod_labels = &spec["template"]["metadata"]["labels"];
    let pod = &spec["template"]["spec"];
    let selects_nmo = |selector: &Value| {
        let labels = selector["matchLabels"].as_object().expect("matchLabels");
        !labels.is_empty() && labels.iter().all(|(k, v)| &pod_labels[k] == v)
    };
    let spread = pod["topologySpreadConstraints"]
        .as_array()
        .expect("a topology spread")
        .iter()
        .find(|c| c["topologyKey"] == "kubernetes.io/hostname")
        .expect("spread over nodes");
    assert_eq!(spread["maxSkew"], 1);
    assert_eq!(spread["whenUnsatisfiable"], "DoNotSchedule");
    // A node nmo does not tolerate (cordoned, in maintenance) is no reason to stay Pending.
    assert_eq!(spread["nodeTaintsPolicy"], "Honor");
    assert!(selects_nmo(&spread["labelSelector"]));

    let pdb = find(&objects, "PodDisruptionBudget", "nmo");
    assert_eq!(
        pdb["metadata"]["namespace"],
        deployment["metadata"]["namespace"]
    );
    assert!(selects_nmo(&pdb["spec"]["selector"]));
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    assert_eq!(pdb["spec"]["unhealthyPodEvictionPolicy"], "AlwaysAllow");

    // As the Go operator: tolerated on control-plane and infra nodes, and preferring them.
    let tolerations = pod["tolerations"].as_array().expect("tolerations");
    for key in [
        "node-role.kubernetes.io/control-plane",
        "node-role.kubernetes.io/master",
        "node-role.kubernetes.io/infra",
    ] {
        assert!(
            tolerations
                .iter()
                .any(|t| t["key"] == key && t["effect"] == "NoSchedule"),
            "{key} not tolerated"
        );
    }
    let preferred =
        pod["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
            .as_array()
            .expect("preferred nodes");
    for key in [
        "node-role.kubernetes.io/control-plane",
        "node-role.kubernetes.io/infra",
    ] {
        assert!(
            preferred
                .iter()
                .any(|p| p["preference"]["matchExpressions"][0]["key"] == key),
            "{key} not preferred"
        );
    }
    // Never tolerated: the taints nmo itself puts on a node to drain it.
    assert!(
        !tolerations.iter().any(|t| t["key"] == "medik8s.io/drain"
            || (t["operator"] == "Exists" && t.get("key").is_none()))
    );
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
}

/// Every pod template in every entry point: OpenShift's restricted SCC refuses a fixed user id
/// outside the namespace's range; the images set their own non-root user.
#[test]
fn no_entry_point_fixes_a_user_id() {
    for entry_point in ENTRY_POINTS {
        for object in build(entry_point) {
            let pod = &object["spec"]["template"]["spec"];
            if pod.is_null() {
                continue;
            }
            let mut contexts = vec![&pod["securityContext"]];
            contexts.extend(
                pod["containers"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| &c["securityContext"]),
            );
            for context in contexts {
                assert!(
                    context.get("runAsUser").is_none() && context.get("runAsGroup").is_none(),
                    "deploy/{entry_point}: {:?} fixes a user id",
                    kind_of(&object)
                );
                assert_eq!(context["runAsNonRoot"], true, "{:?}", kind_of(&object));
            }
        }
    }
}

#[test]
fn the_gke_quota_admits_nmo_critical_pods_in_its_namespace() {
    let objects = build_overlay(
        &["deploy/base", "deploy/webhook"],
        &["deploy/components/gke-critical-pods"],
    );
    let deployment = deployment(&objects);
    let quota = find_all(&objects, "ResourceQuota")
        .into_iter()
        .next()
        .expect("a ResourceQuota");
    assert_eq!(
        quota["metadata"]["namespace"],
        deployment["metadata"]["namespace"]
    );
    let scope = &quota["spec"]["scopeSelector"]["matchExpressions"][0];
    assert_eq!(scope["scopeName"], "PriorityClass");
    assert_eq!(scope["operator"], "In");
    assert!(
        scope["values"]
            .as_array()
            .expect("values")
            .contains(&deployment["spec"]["template"]["spec"]["priorityClassName"])
    );
    // Both replicas and a rolling update's extra one.
    let pods: u64 = quota["spec"]["hard"]["pods"]
        .as_str()
        .expect("a quantity")
        .parse()
        .expect("a number");
    let replicas = deployment["spec"]["replicas"].as_u64().expect("replicas");
    assert!(
        pods > replicas,
        "{pods} pods do not leave room for a rolling update"
    );
}

#[test]
fn the_samples_are_node_maintenances() {
    let samples = build("samples");
    assert!(!samples.is_empty());
    for sample in &samples {
        let typed: nmo::crd::NodeMaintenance =
            serde_json::from_value(sample.clone()).expect("a NodeMaintenance");
        assert!(!typed.spec.node_name.is_empty());
    }
    // Also as files, for `kubectl apply -f`.
    assert!(Path::new(&repo().join("deploy/samples/nodemaintenance.yaml")).exists());
}

/// The flow-control component's FlowSchema selects every request of the ServiceAccount the
/// Deployment runs as, sends it to the component's own priority level, and comes before the
/// built-in `service-accounts` FlowSchema (9000) that would otherwise take it. On a real API
/// server: operator::flow_control.
#[test]
fn the_flow_schema_selects_nmo_s_service_account_for_its_own_priority_level() {
    let objects = build_overlay(&["deploy/install"], &["deploy/components/flow-control"]);
    let pod = &deployment(&objects)["spec"]["template"]["spec"];
    let account = pod["serviceAccountName"]
        .as_str()
        .expect("a service account");
    let namespace = deployment(&objects)["metadata"]["namespace"]
        .as_str()
        .expect("ns");
    assert!(has(&objects, "ServiceAccount", account));
    let schemas = find_all(&objects, "FlowSchema");
    assert_eq!(schemas.len(), 1, "one FlowSchema");
    let spec = &schemas[0]["spec"];
    let level = spec["priorityLevelConfiguration"]["name"]
        .as_str()
        .expect("a priority level");
    let level = find(&objects, "PriorityLevelConfiguration", level);
    assert_eq!(level["spec"]["type"], "Limited");
    let precedence = spec["matchingPrecedence"].as_u64().expect("a precedence");
    assert!(
        (900..9000).contains(&precedence),
        "{precedence}: after the system FlowSchemas, before service-accounts"
    );
    assert_eq!(spec["distinguisherMethod"]["type"], "ByUser");
    let rule = &spec["rules"][0];
    assert_eq!(
        rule["subjects"],
        serde_json::json!([{
            "kind": "ServiceAccount",
            "serviceAccount": {"name": account, "namespace": namespace}
        }])
    );
    assert_eq!(rule["resourceRules"][0]["verbs"], serde_json::json!(["*"]));
    assert_eq!(rule["resourceRules"][0]["clusterScope"], true);
    assert_eq!(
        rule["nonResourceRules"][0]["nonResourceURLs"],
        serde_json::json!(["*"])
    );
    // `nmo uninstall` and `kubectl delete -l` find them by nmo's label.
    for object in [schemas[0], level] {
        assert_eq!(
            object["metadata"]["labels"]["app.kubernetes.io/name"],
            "nmo"
        );
    }
}

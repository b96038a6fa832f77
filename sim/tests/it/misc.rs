//! Discovery through kube's Discovery, typed CRD configuration, RBAC enforcement.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, EvictParams, ListParams};
use kube::discovery::{Discovery, Scope};
use nmo_sim::{ClientOptions, Rbac, Scenario, SimConfig, Simulator};

use crate::support::{first_listed, nm_crd, raw_get, refused, start_plain, status_of};

#[tokio::test]
async fn discovery_and_typed_crd_configuration() {
    let crd: CustomResourceDefinition = serde_json::from_value(nm_crd()).unwrap();
    let sim = Simulator::start(SimConfig::default().crd(&crd).unwrap())
        .await
        .unwrap();
    let client = sim.kube_client().unwrap();
    let v = client.apiserver_version().await.unwrap();
    assert_eq!((v.major.as_str(), v.minor.as_str()), ("1", "33"));
    let d = Discovery::new(client.clone()).run().await.unwrap();
    let (ar, caps) = d
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(ar, _)| ar.plural == "nodemaintenances")
        .expect("the CRD's resource is discovered");
    assert_eq!(
        (ar.group.as_str(), ar.version.as_str(), ar.kind.as_str()),
        ("nodemaintenance.medik8s.io", "v1beta1", "NodeMaintenance")
    );
    assert_eq!(caps.scope, Scope::Cluster);
    assert!(caps.subresources.iter().any(|(s, _)| s.plural == "status"));
    for (g, p) in [
        ("", "pods"),
        ("policy", "poddisruptionbudgets"),
        ("coordination.k8s.io", "leases"),
        ("events.k8s.io", "events"),
        ("apps", "daemonsets"),
    ] {
        assert!(
            d.groups()
                .flat_map(|x| x.recommended_resources())
                .any(|(ar, _)| ar.group == g && ar.plural == p),
            "{g}/{p}"
        );
    }
    let (code, body) = raw_get(&client, "/api/v1").await;
    assert_eq!(code, 200);
    let ev = body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods/eviction")
        .unwrap()
        .clone();
    assert_eq!(
        (
            ev["group"].as_str(),
            ev["version"].as_str(),
            ev["kind"].as_str()
        ),
        (Some("policy"), Some("v1"), Some("Eviction"))
    );
    let crd_obj = sim
        .get_json(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "",
            "nodemaintenances.nodemaintenance.medik8s.io",
        )
        .unwrap();
    assert!(
        crd_obj["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    );
    // Deleting the CRD unregisters its resource.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete(
        "nodemaintenances.nodemaintenance.medik8s.io",
        &DeleteParams::default(),
    )
    .await
    .unwrap();
    let (code, _) = raw_get(
        &client,
        "/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances",
    )
    .await;
    assert_eq!(code, 404);
    sim.shutdown().await;
}

const ROLE: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: nmo
rules:
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["pods/eviction"]
  verbs: ["create"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "create", "update"]
"#;

#[tokio::test]
async fn rbac_denies_with_the_real_message() {
    let user = "system:serviceaccount:nmo:nmo";
    let mut cfg = SimConfig::default()
        .scenario(Scenario::plain(1, 1))
        .token("nmo-token", user)
        .token("admin-token", "admin");
    cfg.rbac = Some(Rbac::from_yaml(user, ROLE).unwrap());
    let sim = Simulator::start(cfg).await.unwrap();
    let nmo = sim
        .kube_client_with(&ClientOptions {
            token: Some("nmo-token".into()),
            ..Default::default()
        })
        .unwrap();
    let admin = sim
        .kube_client_with(&ClientOptions {
            token: Some("admin-token".into()),
            ..Default::default()
        })
        .unwrap();
    Api::<Node>::all(nmo.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(nmo.clone(), "workloads");
    let victim = first_listed(&pods).await;
    let st = refused(pods.delete(&victim, &DeleteParams::default())).await;
    assert_eq!(st.code, 403);
    assert_eq!(st.reason, "Forbidden");
    assert_eq!(
        st.message,
        format!(
            "pods \"{victim}\" is forbidden: User \"{user}\" cannot delete resource \"pods\" in API group \"\" in the namespace \"workloads\""
        )
    );
    pods.evict(&victim, &EvictParams::default()).await.unwrap();
    let leases: Api<Lease> = Api::namespaced(nmo.clone(), "default");
    let st = refused(leases.delete("x", &DeleteParams::default())).await;
    assert_eq!(
        st.message,
        format!(
            "leases.coordination.k8s.io \"x\" is forbidden: User \"{user}\" cannot delete resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"default\""
        )
    );
    let st = status_of(
        Api::<Lease>::all(nmo)
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(
        st.message,
        format!(
            "leases.coordination.k8s.io is forbidden: User \"{user}\" cannot list resource \"leases\" in API group \"coordination.k8s.io\" at the cluster scope"
        )
    );
    // Other identities are not restricted.
    Api::<Lease>::all(admin)
        .list(&ListParams::default())
        .await
        .unwrap();
    sim.shutdown().await;
}

#[test]
fn cli_arguments_parse_like_nmo_sim_expects() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        sim: nmo_sim::cli::SimArgs,
    }
    let c = Cmd::parse_from([
        "nmo-sim",
        "--nodes",
        "50",
        "--pods-per-node",
        "20",
        "--port",
        "6443",
        "--kubeconfig",
        "/tmp/k",
    ]);
    assert_eq!(
        (c.sim.nodes, c.sim.pods_per_node, c.sim.port),
        (50, 20, 6443)
    );
    assert_eq!(
        c.sim.kubeconfig.as_deref(),
        Some(std::path::Path::new("/tmp/k"))
    );
    let d = Cmd::parse_from(["nmo-sim"]);
    assert_eq!(
        (
            d.sim.nodes,
            d.sim.pods_per_node,
            d.sim.port,
            d.sim.time_scale
        ),
        (3, 10, 0, 1.0)
    );
}

#[tokio::test]
async fn kubeconfig_works_with_kube_config_loading() {
    let sim = start_plain(2, 0).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&path).unwrap();
    let kc = kube::config::Kubeconfig::read_from(&path).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(cfg).unwrap();
    let nodes = Api::<Node>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(nodes.items.len(), 2);
    sim.shutdown().await;
}

//! The repository's manifests applied to the real server: the CRD becomes Established and
//! serves NodeMaintenances; the RBAC binds nmo's ServiceAccount to exactly its rules.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use nmo_envtest::{Identity, unique_name, yaml_files_in};

use crate::support::{cluster, deploy_dir, status_code};

fn nodemaintenances(client: kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("nodemaintenance.medik8s.io", "v1beta1", "NodeMaintenance");
    Api::all_with(
        client,
        &ApiResource::from_gvk_with_plural(&gvk, "nodemaintenances"),
    )
}

fn maintenance(name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "nodemaintenance.medik8s.io/v1beta1",
        "kind": "NodeMaintenance",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

#[tokio::test]
async fn the_crd_installs_is_established_and_validates() {
    let crd = deploy_dir().join("crd.yaml");
    let names = cluster()
        .install_crds(std::slice::from_ref(&crd))
        .await
        .unwrap();
    assert_eq!(names, ["nodemaintenances.nodemaintenance.medik8s.io"]);
    // Again, as a second test of the binary would: nothing changes, nothing fails.
    cluster().install_crds(&[crd]).await.unwrap();

    let api = nodemaintenances(cluster().admin_client().unwrap());
    let name = unique_name("nm");
    let spec = serde_json::json!({"nodeName": "node-x", "reason": "test"});
    api.create(&PostParams::default(), &maintenance(&name, spec))
        .await
        .unwrap();
    assert_eq!(
        api.get(&name).await.unwrap().data["spec"]["nodeName"],
        "node-x"
    );
    // The schema is enforced: nodeName is required.
    let invalid = maintenance(&unique_name("nm"), serde_json::json!({"reason": "no node"}));
    let refused = api
        .create(&PostParams::default(), &invalid)
        .await
        .unwrap_err();
    assert_eq!(status_code(&refused), Some(422), "{refused}");
}

#[tokio::test]
async fn the_real_server_refuses_a_drain_timeout_that_is_not_a_go_duration() {
    let crd = deploy_dir().join("crd.yaml");
    cluster().install_crds(&[crd]).await.unwrap();
    let api = nodemaintenances(cluster().admin_client().unwrap());
    let create = |spec| {
        let api = api.clone();
        async move {
            api.create(
                &PostParams::default(),
                &maintenance(&unique_name("nm"), spec),
            )
            .await
        }
    };
    for bad in ["soon", "30", "1d", "-5m", "5 m"] {
        let spec = serde_json::json!({"nodeName": "node-x", "drainTimeout": bad});
        let refused = create(spec).await.unwrap_err();
        assert_eq!(status_code(&refused), Some(422), "{bad}: {refused}");
        assert!(refused.to_string().contains("drainTimeout"), "{refused}");
    }
    let spec = serde_json::json!({"nodeName": "node-x", "onDrainTimeout": "Later"});
    let refused = create(spec).await.unwrap_err();
    assert_eq!(status_code(&refused), Some(422), "{refused}");
    for good in ["30m", "1h30m", "1.5h", "90s"] {
        let spec = serde_json::json!({
            "nodeName": "node-x", "drainTimeout": good, "onDrainTimeout": "Undo"
        });
        create(spec)
            .await
            .unwrap_or_else(|e| panic!("{good} refused: {e}"));
    }
}

#[tokio::test]
async fn a_file_without_crds_is_an_error() {
    let rbac = deploy_dir().join("rbac.yaml");
    let error = cluster().install_crds(&[rbac]).await.unwrap_err();
    assert!(
        error.to_string().contains("no CustomResourceDefinition"),
        "{error}"
    );
}

#[tokio::test]
async fn nmo_gets_exactly_the_rights_deploy_grants() {
    let deploy = yaml_files_in(&deploy_dir()).unwrap();
    cluster().install_crds(&deploy).await.unwrap();
    let applied = cluster().apply_rbac(&deploy).await.unwrap();
    let nmo = Identity::service_account("nmo-system", "nmo");
    assert_eq!(applied.subjects, std::slice::from_ref(&nmo));
    for object in [
        "ServiceAccount nmo-system/nmo",
        "ClusterRole nmo-manager",
        "ClusterRoleBinding nmo-manager",
        "Role nmo-system/nmo-leader-election",
        "RoleBinding nmo-system/nmo-leader-election",
    ] {
        assert!(
            applied.objects.iter().any(|o| o == object),
            "{object} not in {:?}",
            applied.objects
        );
    }
    // Applying again changes nothing.
    cluster().apply_rbac(&deploy).await.unwrap();

    let client = cluster().client_as(&nmo).unwrap();
    // Granted: reading nodes and NodeMaintenances; the leader-election lease in nmo-system.
    Api::<Node>::all(client.clone())
        .list(&Default::default())
        .await
        .expect("nmo may list nodes");
    nodemaintenances(client.clone())
        .list(&Default::default())
        .await
        .expect("nmo may list NodeMaintenances");
    let leases: Api<Lease> = Api::namespaced(client.clone(), "nmo-system");
    let missing = leases.get("no-such-lease").await.unwrap_err();
    assert_eq!(
        status_code(&missing),
        Some(404),
        "allowed, and absent: {missing}"
    );

    // Not granted: secrets at all, creating nodes, listing leases.
    let secrets: Api<Secret> = Api::all(client.clone());
    let refused = secrets.list(&Default::default()).await.unwrap_err();
    assert_eq!(status_code(&refused), Some(403), "{refused}");
    let node: Node =
        serde_json::from_value(serde_json::json!({"metadata": {"name": unique_name("n")}}))
            .unwrap();
    let refused = Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap_err();
    assert_eq!(status_code(&refused), Some(403), "{refused}");
    let refused = leases.list(&Default::default()).await.unwrap_err();
    assert_eq!(status_code(&refused), Some(403), "{refused}");

    // The grants come from the bindings: the same request as another service account fails.
    let other = cluster()
        .client_as(&Identity::service_account("nmo-system", "someone-else"))
        .unwrap();
    let refused = Api::<Node>::all(other)
        .list(&Default::default())
        .await
        .unwrap_err();
    assert_eq!(status_code(&refused), Some(403), "{refused}");
}

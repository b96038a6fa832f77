//! Clients of every kind against the shared control plane: kube clients per runtime,
//! kubeconfigs kubectl reads, and identities the real RBAC authorizer tells apart.

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;
use nmo_envtest::{Error, Identity};

use crate::support::{cluster, status_code};

#[test]
fn kubectl_reads_the_admin_kubeconfig() {
    let output = cluster()
        .kubectl(&Identity::admin())
        .unwrap()
        .args(["get", "namespaces", "-o", "name"])
        .output()
        .expect("kubectl runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    for namespace in ["default", "kube-system", "kube-node-lease"] {
        assert!(
            stdout
                .lines()
                .any(|line| line == format!("namespace/{namespace}")),
            "{namespace} missing from:\n{stdout}"
        );
    }
}

#[test]
fn kubectl_as_a_user_without_bindings_is_forbidden() {
    let stranger = Identity::user("stranger", Vec::<String>::new());
    let output = cluster()
        .kubectl(&stranger)
        .unwrap()
        .args(["get", "secrets", "-n", "default"])
        .output()
        .expect("kubectl runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a stranger listed secrets");
    assert!(
        stderr.contains("Forbidden") && stderr.contains("User \"stranger\""),
        "{stderr}"
    );
}

#[test]
fn a_client_outside_a_runtime_is_refused_not_built() {
    let outcome = cluster().admin_client();
    assert!(
        matches!(outcome, Err(Error::NoRuntime)),
        "{:?}",
        outcome.err()
    );
    // Its configuration is what such code takes to its runtime instead.
    let config = cluster().client_config(&Identity::admin()).unwrap();
    assert_eq!(
        config.cluster_url.to_string().trim_end_matches('/'),
        cluster().url()
    );
}

/// Two runtimes, as two tests or an operator thread and its test have: each builds its client.
#[test]
fn clients_built_in_separate_runtimes_both_work() {
    let list_in_own_runtime = || {
        std::thread::spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let client = cluster().admin_client().unwrap();
                let namespaces: Api<Namespace> = Api::all(client);
                namespaces
                    .list(&Default::default())
                    .await
                    .unwrap()
                    .items
                    .len()
            })
        })
    };
    let (first, second) = (list_in_own_runtime(), list_in_own_runtime());
    assert!(first.join().unwrap() >= 4);
    assert!(second.join().unwrap() >= 4);
}

#[tokio::test]
async fn an_identity_is_who_the_server_says_it_is() {
    // A SelfSubjectReview reports the authenticated user and groups.
    let identity = Identity::user("reviewer", ["team-a", "team-b"]);
    let client = cluster().client_as(&identity).unwrap();
    let request = http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
        .header("content-type", "application/json")
        .body(
            serde_json::to_vec(&serde_json::json!({
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "SelfSubjectReview",
            }))
            .unwrap(),
        )
        .unwrap();
    let review: serde_json::Value = client.request(request).await.unwrap();
    let user = &review["status"]["userInfo"];
    assert_eq!(user["username"], "reviewer");
    let groups: Vec<&str> = user["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|group| group.as_str())
        .collect();
    assert!(
        groups.contains(&"team-a") && groups.contains(&"team-b"),
        "{groups:?}"
    );

    // And nothing is granted to it.
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    let refused = secrets.list(&Default::default()).await.unwrap_err();
    assert_eq!(status_code(&refused), Some(403), "{refused}");
}

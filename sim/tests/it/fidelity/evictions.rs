//! The Eviction API (policy/v1) under PodDisruptionBudgets: allowed, refused (429), several
//! PDBs (500), a missing pod (404).

use serde_json::json;

use super::fixtures::{create_pdb, running_pods};
use super::harness::{Pair, Req, compare};

const SA: &str = "see crud::a_created_pod_is_defaulted_alike";

fn eviction(name: &str) -> Req {
    Req::post(
        format!("/api/v1/namespaces/{{ns}}/pods/{name}/eviction"),
        json!({"apiVersion": "policy/v1", "kind": "Eviction",
               "metadata": {"name": name}}),
    )
}

#[tokio::test]
async fn an_eviction_the_pdb_allows_is_a_201_and_deletes_gracefully() {
    let pair = Pair::start().await;
    running_pods(&pair, &["web-0", "web-1"], "web").await;
    // (`maxUnavailable` needs the pods' controller to count them: these have none.)
    create_pdb(&pair, "web", "web", json!({"minAvailable": 1}), 2).await;
    let (sim, real) = pair.both(eviction("web-0")).await;
    compare("an allowed eviction", &sim, &real).same();
    // The pod is now terminating, with the grace period of its spec.
    let (sim, real) = pair
        .both(Req::get("/api/v1/namespaces/{ns}/pods/web-0"))
        .await;
    compare("the evicted pod", &sim, &real)
        .known("/spec/serviceAccountName", SA)
        .same();
    // And the PDB counts it as a disruption.
    let (sim, real) = pair
        .both(Req::get(
            "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/web",
        ))
        .await;
    compare("the budget after the eviction", &sim, &real)
        .known(
            "/status/disruptedPods",
            "holds the time of each eviction (a map keyed by pod name whose values differ)",
        )
        .same();
}

#[tokio::test]
async fn an_eviction_the_pdb_refuses_is_a_429_naming_it() {
    let pair = Pair::start().await;
    running_pods(&pair, &["web-0", "web-1"], "web").await;
    create_pdb(&pair, "web", "web", json!({"minAvailable": 2}), 2).await;
    let (sim, real) = pair.both(eviction("web-0")).await;
    compare("a refused eviction", &sim, &real).same();
}

#[tokio::test]
async fn an_eviction_under_two_pdbs_is_a_500() {
    let pair = Pair::start().await;
    running_pods(&pair, &["web-0"], "web").await;
    create_pdb(&pair, "web-a", "web", json!({"minAvailable": 0}), 1).await;
    create_pdb(&pair, "web-b", "web", json!({"minAvailable": 0}), 1).await;
    let (sim, real) = pair.both(eviction("web-0")).await;
    compare("an eviction under two budgets", &sim, &real).same();
}

#[tokio::test]
async fn an_eviction_of_a_missing_pod_is_a_404() {
    let pair = Pair::start().await;
    let (sim, real) = pair.both(eviction("missing")).await;
    compare("an eviction of a missing pod", &sim, &real).same();
}

#[tokio::test]
async fn an_eviction_without_a_pdb_is_a_201() {
    let pair = Pair::start().await;
    running_pods(&pair, &["web-0"], "web").await;
    let (sim, real) = pair.both(eviction("web-0")).await;
    compare("an eviction without a budget", &sim, &real).same();
}

#[tokio::test]
async fn an_eviction_whose_name_does_not_match_the_pod_is_a_400() {
    let pair = Pair::start().await;
    running_pods(&pair, &["web-0"], "web").await;
    let wrong = Req::post(
        "/api/v1/namespaces/{ns}/pods/web-0/eviction",
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "other"}}),
    );
    let (sim, real) = pair.both(wrong).await;
    compare("an eviction naming another pod", &sim, &real).same();
}

//! The Eviction API (policy/v1) under PodDisruptionBudgets: allowed, refused (429), several
//! PDBs (500), a missing pod (404).

use serde_json::{Value, json};

use super::fixtures::{create_pdb, pod_at, running_pods};
use super::harness::{Compare, Pair, Req};

/// An eviction of `pod` named `name`.
fn eviction_named(pod: &str, name: &str) -> Req {
    Req::post(
        format!("{}/eviction", pod_at(pod)),
        json!({"apiVersion": "policy/v1", "kind": "Eviction",
               "metadata": {"name": name}}),
    )
}

fn eviction(name: &str) -> Req {
    eviction_named(name, name)
}

/// Running pods `pods` (app=web) under the budgets `pdbs` (name, spec), then `eviction` on both;
/// the pair, and the answers compared.
async fn evict(
    what: &str,
    pods: &[&str],
    pdbs: &[(&str, Value)],
    eviction: Req,
) -> (Pair, Compare) {
    let pair = Pair::start().await;
    running_pods(&pair, pods, "web").await;
    let healthy = i64::try_from(pods.len()).expect("a few pods");
    for (name, spec) in pdbs {
        create_pdb(&pair, name, "web", spec.clone(), healthy).await;
    }
    let compared = pair.compare(what, eviction).await;
    (pair, compared)
}

#[tokio::test]
async fn an_eviction_the_pdb_allows_is_a_201_and_deletes_gracefully() {
    // (`maxUnavailable` needs the pods' controller to count them: these have none.)
    let budget = [("web", json!({"minAvailable": 1}))];
    let (pair, allowed) = evict(
        "an allowed eviction",
        &["web-0", "web-1"],
        &budget,
        eviction("web-0"),
    )
    .await;
    allowed.same();
    // The pod is now terminating, with the grace period of its spec.
    pair.compare("the evicted pod", Req::get(pod_at("web-0")))
        .await
        .defaulted_service_account("")
        .same();
    // And the PDB counts it as a disruption.
    let pdb = Req::get("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/web");
    pair.compare("the budget after the eviction", pdb)
        .await
        .known(
            "/status/disruptedPods",
            "holds the time of each eviction (a map keyed by pod name whose values differ)",
        )
        .same();
}

#[tokio::test]
async fn an_eviction_the_pdb_refuses_is_a_429_naming_it() {
    let budget = [("web", json!({"minAvailable": 2}))];
    let pods = ["web-0", "web-1"];
    let (_pair, refused) = evict("a refused eviction", &pods, &budget, eviction("web-0")).await;
    refused.same();
}

#[tokio::test]
async fn an_eviction_under_two_pdbs_is_a_500() {
    let none = json!({"minAvailable": 0});
    let budgets = [("web-a", none.clone()), ("web-b", none)];
    let what = "an eviction under two budgets";
    let (_pair, two) = evict(what, &["web-0"], &budgets, eviction("web-0")).await;
    two.same();
}

#[tokio::test]
async fn an_eviction_of_a_missing_pod_is_a_404() {
    let what = "an eviction of a missing pod";
    let (_pair, missing) = evict(what, &[], &[], eviction("missing")).await;
    missing.same();
}

#[tokio::test]
async fn an_eviction_without_a_pdb_is_a_201() {
    let what = "an eviction without a budget";
    let (_pair, unbudgeted) = evict(what, &["web-0"], &[], eviction("web-0")).await;
    unbudgeted.same();
}

#[tokio::test]
async fn an_eviction_whose_name_does_not_match_the_pod_is_a_400() {
    let wrong = eviction_named("web-0", "other");
    let what = "an eviction naming another pod";
    let (_pair, mismatched) = evict(what, &["web-0"], &[], wrong).await;
    mismatched.same();
}

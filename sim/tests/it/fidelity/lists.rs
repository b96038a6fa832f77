//! LIST with label and field selectors, resourceVersions and pages.

use serde_json::json;

use super::fixtures::{PODS, pod};
use super::harness::{Pair, Reply, Req, Side, compare};

/// The pods of a list (`/items/<i>`), `n` of them.
fn items(n: usize) -> impl Iterator<Item = String> {
    (0..n).map(|i| format!("/items/{i}"))
}

/// Three pods: web-0 (app=web, tier=front) and web-1 (app=web, tier=back) on node-a, db-0
/// (app=db, no tier) on node-b.
async fn three_pods(pair: &Pair) {
    let mut back = pod("web-1", "node-a", "web");
    back["metadata"]["labels"]["tier"] = json!("back");
    let mut db = pod("db-0", "node-b", "db");
    db["metadata"]["labels"]
        .as_object_mut()
        .expect("labels")
        .remove("tier");
    for object in [pod("web-0", "node-a", "web"), back, db] {
        pair.seed(Req::post(PODS, object)).await;
    }
}

/// For `Pair::each`: the next page of `limit` after each server's `first` page.
fn next_page(first: &(Reply, Reply), limit: usize) -> impl Fn(Side) -> Req {
    move |side| {
        let first = &side.of(first).body;
        let token = first["metadata"]["continue"].as_str().unwrap_or_default();
        Req::get(format!("{PODS}?limit={limit}&continue={token}"))
    }
}

/// The list `query` answers, compared.
async fn list_case(query: &str) {
    list_at(&format!("{PODS}?{query}")).await;
}

/// The list `path` (with its query) answers, compared.
async fn list_at(path: &str) {
    let pair = Pair::start().await;
    three_pods(&pair).await;
    pair.compare(format!("LIST {path}"), Req::get(path))
        .await
        .defaulted_service_accounts(items(3))
        .same();
}

#[tokio::test]
async fn a_label_selector_with_equality_and_inequality() {
    list_case("labelSelector=app%3Dweb%2Ctier%21%3Dback").await;
}

#[tokio::test]
async fn a_label_selector_with_a_set() {
    list_case("labelSelector=app%20in%20%28web%2Cdb%29%2Ctier%20notin%20%28back%29").await;
}

#[tokio::test]
async fn a_label_selector_on_existence() {
    list_case("labelSelector=%21tier").await;
}

#[tokio::test]
async fn a_field_selector_on_the_node() {
    list_case("fieldSelector=spec.nodeName%3Dnode-a").await;
}

#[tokio::test]
async fn a_field_selector_on_the_name_and_the_phase() {
    list_case("fieldSelector=metadata.name%3Dweb-1%2Cstatus.phase%3DPending").await;
}

#[tokio::test]
async fn a_field_selector_with_inequality() {
    list_case("fieldSelector=spec.nodeName%21%3Dnode-a").await;
}

#[tokio::test]
async fn an_unsupported_field_selector_is_a_400() {
    list_case("fieldSelector=spec.hostname%3Dx").await;
}

#[tokio::test]
async fn a_list_at_resource_version_0_is_served() {
    list_case("resourceVersion=0").await;
}

#[tokio::test]
async fn a_first_page_has_a_continue_token_and_a_remaining_count() {
    let pair = Pair::start().await;
    three_pods(&pair).await;
    pair.compare("LIST pods?limit=2", Req::get(format!("{PODS}?limit=2")))
        .await
        .known(
            "/metadata/remainingItemCount",
            "the simulator does not count the items left after a page",
        )
        .defaulted_service_accounts(items(2))
        .same();
}

#[tokio::test]
async fn a_continue_token_whose_version_is_gone_is_a_410() {
    // The simulator keeps 5 events per resource here; the real server compacts etcd every
    // 5 s here, after which a continue token's resourceVersion is gone.
    let pair = Pair::start_with(|config| config.history_limit = 5).await;
    three_pods(&pair).await;
    let first = pair.both(Req::get(format!("{PODS}?limit=1"))).await;
    let next = next_page(&first, 1);
    for i in 0..8 {
        pair.seed(Req::post(PODS, pod(&format!("later-{i}"), "node-a", "web")))
            .await;
    }
    let sim = pair.on(Side::Sim, next(Side::Sim)).await;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    let real = loop {
        let real = pair.on(Side::Real, next(Side::Real)).await;
        if real.code == 410 || tokio::time::Instant::now() > deadline {
            break real;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    };
    compare("LIST pods with an expired continue token", (sim, real)).same();
}

#[tokio::test]
async fn the_next_page_follows_the_continue_token() {
    let pair = Pair::start().await;
    three_pods(&pair).await;
    let first = pair.both(Req::get(format!("{PODS}?limit=2"))).await;
    pair.compare_each("LIST pods, second page", next_page(&first, 2))
        .await
        .defaulted_service_accounts(items(1))
        .same();
}

#[tokio::test]
async fn a_list_across_namespaces_by_field_selector() {
    list_at("/api/v1/pods?fieldSelector=metadata.namespace%3Dno-such-namespace").await;
}

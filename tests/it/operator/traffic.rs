//! What a maintenance costs the API server, counted for nmo's client alone: by the simulator's
//! accounting, or the real API server's audit log.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use nmo_sim::Query;

use nmo_actors::config::defaults::LEASE_NAMESPACE;

use crate::support::{Backend, TestEnv, both_backends};

/// Drains `node` with a maintenance of that name and returns nmo's requests for it, counted
/// from the maintenance's creation until a second after it succeeded.
async fn drain_counted<'a>(env: &'a mut TestEnv, node: &str) -> Requests<'a> {
    env.forget_operator_requests();
    env.create_maintenance(node, node).await;
    env.wait_succeeded(node).await;
    // Anything still to come from this maintenance (a last status write, say) is counted too.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let report = env.operator_requests_report();
    eprintln!("nmo's requests to drain {node}:\n{}", report.join("\n"));
    Requests { env, report }
}

/// nmo's requests, as counted since they were last forgotten.
struct Requests<'a> {
    env: &'a TestEnv,
    report: Vec<String>,
}

impl Requests<'_> {
    fn count(&self, query: Query) -> u64 {
        self.env.count_operator_requests(&query)
    }

    /// How many requests of `verb` on `resource` (any subresource).
    fn of(&self, verb: &str, resource: &str) -> u64 {
        self.count(Query::all().verb(verb).resource(resource))
    }
}

/// On the real backend each watch lists first: its etcd (3.4.23) cannot serve streaming lists
/// (`RequestWatchProgress`), which the simulator and an API server on etcd 3.4.31+ or 3.5.13+
/// serve.
async fn a_drain_costs_one_eviction_per_pod_and_a_handful_of_other_requests(backend: Backend) {
    // The lease namespace exists, as it does for every maintenance but a cluster's first.
    let streaming = backend == Backend::Sim;
    let mut env = TestEnv::on(backend)
        .nodes(3, 10)
        .namespace(LEASE_NAMESPACE)
        .start()
        .await;
    // Let the operator's start-up (the NodeMaintenance watch) settle before counting.
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Without streaming lists, each watch lists once.
    let listed = if streaming { 0 } else { 1 };

    let first = drain_counted(&mut env, "node-0").await;
    let evictions = first.count(Query::all().resource("pods").subresource("eviction"));
    let total = first.count(Query::all());
    assert_eq!(
        evictions, 10,
        "one eviction per pod, no retries without budgets"
    );
    for (verb, resource, expected, why) in [
        ("get", "pods", 0, "no per-pod polling"),
        (
            "list",
            "pods",
            listed,
            "the first counts and the drain both come from the pod watch's first list",
        ),
        ("list", "nodes", listed, "the node watch lists once at most"),
        (
            "get",
            "nodes",
            0,
            "the node is patched as the node watch delivered it",
        ),
        (
            "get",
            "nodemaintenances",
            0,
            "the watch's copy is used: no re-read, no read before adding the finalizer",
        ),
        (
            "get",
            "leases",
            0,
            "a first maintenance creates its lease without reading it first",
        ),
    ] {
        assert_eq!(first.of(verb, resource), expected, "{why}");
    }
    // One watch of each kind: pods for the node, nodes and leases for the process.
    for (resource, why) in [
        ("pods", "one pod watch for the node"),
        ("nodes", "one node watch"),
        ("leases", "one lease watch for the process"),
    ] {
        assert!(first.of("watch", resource) <= 1, "{why}");
    }
    let status_writes = first.count(
        Query::all()
            .resource("nodemaintenances")
            .subresource("status"),
    );
    assert!(
        status_writes <= 2,
        "a drain of a second writes Running and Succeeded, its progress not at all: {status_writes}"
    );
    // finalizer, 2 events, lease, node patch, pod watch, 2 status writes, the node watch and
    // the lease watch every maintenance shares (and the watches' three LISTs where there are no
    // streaming lists).
    assert!(
        total <= evictions + 10 + 3 * listed,
        "{total} requests for {evictions} evictions: {:?}",
        first.report
    );

    // The node watch is shared: a second maintenance opens none.
    let second = drain_counted(&mut env, "node-1").await;
    // Pods drained from node-0 may have been placed on node-1: count its evictions.
    let evictions = second.count(Query::all().resource("pods").subresource("eviction"));
    let total = second.count(Query::all());
    assert_eq!(
        second.of("watch", "nodes") + second.of("list", "nodes") + second.of("get", "nodes"),
        0,
        "the second maintenance reads its node from the shared node watch: {:?}",
        second.report
    );
    // finalizer, 2 events, lease, node patch, pod watch (and its LIST), 2 status writes.
    assert!(
        total <= evictions + 8 + listed,
        "{total} requests for {evictions} evictions: {:?}",
        second.report
    );
    env.stop_cleanly().await;
}
both_backends!(a_drain_costs_one_eviction_per_pod_and_a_handful_of_other_requests);

/// Counted by the simulator, or on the real API server from its audit log.
async fn an_undo_costs_five_requests_and_reads_nothing(backend: Backend) {
    let mut env = TestEnv::on(backend)
        .nodes(2, 3)
        .namespace(LEASE_NAMESPACE)
        .start_maintaining("nm-0", "node-0")
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    env.forget_operator_requests();

    env.end_maintenance("nm-0").await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let ours = |query: Query| env.count_operator_requests(&query);
    let report = env.operator_requests_report();
    eprintln!("nmo's requests for one undo:\n{}", report.join("\n"));
    for resource in ["nodes", "leases", "nodemaintenances"] {
        assert_eq!(
            ours(Query::all().verb("get").resource(resource)),
            0,
            "the undo reads no {resource}: {report:?}"
        );
    }
    // The node patch, its Uncordon event, the lease's conditional delete, the finalizer
    // patch and the Removed event.
    assert_eq!(ours(Query::all().verb("delete").resource("leases")), 1);
    assert!(ours(Query::all()) <= 5, "{report:?}");
    assert!(env.lease("node-0").await.is_none(), "the lease is released");
    env.stop_cleanly().await;
}

both_backends!(an_undo_costs_five_requests_and_reads_nothing);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_eviction_reaches_nmo_at_once_not_after_client_retries() {
    let env = TestEnv::builder().nodes(1, 1).start_idle().await;
    let sim = env.sim();
    let uri: http::Uri = sim.base_url().parse().expect("a URL");
    let client = nmo::operator::client(
        kube::Config::new(uri),
        &nmo::operator::OperatorOptions::default(),
    )
    .expect("a client")
    .client;
    sim.faults().add(
        nmo_sim::FaultRule::on(Some("create"), Some("pods"))
            .subresource("eviction")
            .errors(1.0, 429),
    );
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client, "workloads");
    let name = env
        .list_json::<Pod>(Some("workloads"), &ListParams::default())
        .await[0]["metadata"]["name"]
        .as_str()
        .expect("a pod")
        .to_string();
    let started = std::time::Instant::now();
    let refused = tokio::time::timeout(
        Duration::from_secs(10),
        pods.evict(&name, &Default::default()),
    )
    .await
    .expect("the refusal comes back at once, not after the client's own retries");
    assert!(refused.is_err(), "the injected 429 comes back");
    assert_eq!(
        sim.requests(&Query::all().subresource("eviction")),
        1,
        "one request, no retries"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

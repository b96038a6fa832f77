//! nmo's HTTP/2 client (`api_client`: requests and watches multiplexed over a few lanes)
//! against a real kube-apiserver that goes away in each way a connection can die: GOAWAY
//! (`--goaway-chance`, as API servers behind a load balancer are run, and what a graceful
//! shutdown sends), RST (the server SIGKILLed: the kernel resets its connections) and a
//! half-open connection (the server SIGSTOPped: TCP stays up and nothing answers, as when a
//! machine or a network path vanishes). Each time, a dead connection must take its streams
//! (the watches) with it, and the next request must open a fresh connection and succeed.
//!
//! Control planes of their own (etcd and kube-apiserver only): these tests take the API server
//! away, and its GOAWAYs would reach every client of the shared one (and end the watches that
//! the half-open test needs open).

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use nmo::api_client::{self, ApiClientOptions, ConnectionCount};
use nmo::operator::client_config;
use nmo_envtest::{Component, ControlPlane, Identity, Options};

/// How often the server answers a request with GOAWAY (its maximum).
const GOAWAY_CHANCE: &str = "0.02";
/// Reads after which a server that never sent GOAWAY fails the GOAWAY test (at a chance of
/// 0.02 the odds of that are below one in 10^17).
const MOST_GOAWAY_READS: usize = 2_000;
/// PINGs after this much silence, and a connection is given up when one is not answered in
/// as long (nmo's defaults are 30 s and 15 s, client-go's too: shortened to keep the test
/// short).
const KEEP_ALIVE: Duration = Duration::from_secs(1);
/// A dead connection's watch must have failed within this.
const NOTICED_WITHIN: Duration = Duration::from_secs(10);

fn control_plane(name: &str, extra_args: Vec<(Component, String)>) -> &'static ControlPlane {
    let base = std::env::temp_dir().join(format!("nmo-it-{name}-{}", std::process::id()));
    let started = ControlPlane::start(Options {
        base_dir: Some(base),
        extra_args,
        ..Options::api_only()
    })
    .unwrap_or_else(|error| panic!("the real API server backend cannot start: {error}"));
    // Leaked: the control plane lives as long as the test binary (its processes and directory
    // go when the binary ends), so that the faults can run on blocking threads.
    Box::leak(Box::new(started))
}

/// nmo's client on `control_plane` and a ConfigMap `kept` to read back.
async fn client_with_an_object(control_plane: &ControlPlane) -> (Api<ConfigMap>, ConnectionCount) {
    let (client, connections) = nmo_client(control_plane);
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let object = ConfigMap {
        metadata: ObjectMeta {
            name: Some("kept".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    within("creating kept", api.create(&PostParams::default(), &object)).await;
    (api, connections)
}

/// nmo's client (HTTP/2 lanes, short keep-alive) as the admin, and its connection count.
fn nmo_client(control_plane: &ControlPlane) -> (kube::Client, ConnectionCount) {
    let config = control_plane
        .client_config(&Identity::admin())
        .expect("a client configuration");
    let options = ApiClientOptions {
        keep_alive_interval: Some(KEEP_ALIVE),
        keep_alive_timeout: KEEP_ALIVE,
        ..ApiClientOptions::default()
    };
    let connections = ConnectionCount::default();
    let client = api_client::client(&client_config(config), &options, connections.clone())
        .expect("nmo's client");
    (client, connections)
}

/// `call`'s answer, or a failure naming `what` after 10 s: a request that hangs is a defect.
async fn within<T>(what: &str, call: impl std::future::Future<Output = kube::Result<T>>) -> T {
    match tokio::time::timeout(Duration::from_secs(10), call).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(error)) => panic!("{what}: {error:?}"),
        Err(elapsed) => panic!("{what}: no answer ({elapsed})"),
    }
}

/// Runs a blocking fault of the control plane off the test's runtime.
async fn fault(
    control_plane: &'static ControlPlane,
    apply: impl FnOnce(&ControlPlane) -> nmo_envtest::Result<()> + Send + 'static,
) {
    tokio::task::spawn_blocking(move || apply(control_plane))
        .await
        .expect("the fault ran")
        .expect("the fault applied");
}

/// A watch of the ConfigMaps of `default` with one event read (a change of `kept` made for it):
/// its stream is open on a lane, and flowing.
async fn open_watch(
    api: &Api<ConfigMap>,
) -> futures::stream::BoxStream<'static, Result<WatchEvent<ConfigMap>, kube::Error>> {
    let listed = within("a list", api.list(&ListParams::default().limit(1))).await;
    let version = listed.metadata.resource_version.unwrap_or_default();
    let mut stream = within(
        "a watch",
        api.watch(&WatchParams::default().timeout(290), &version),
    )
    .await
    .boxed();
    let touch = serde_json::json!({"data": {"touched": format!("{:?}", Instant::now())}});
    within(
        "a change of kept",
        api.patch("kept", &PatchParams::default(), &Patch::Merge(&touch)),
    )
    .await;
    let first = tokio::time::timeout(Duration::from_secs(10), stream.try_next()).await;
    assert!(
        matches!(first, Ok(Ok(Some(WatchEvent::Modified(_))))),
        "the watch's first event: {first:?}"
    );
    stream
}

/// How long until `stream` fails or ends (it must, its connection being dead).
async fn until_broken(
    stream: &mut futures::stream::BoxStream<'static, Result<WatchEvent<ConfigMap>, kube::Error>>,
) -> Duration {
    let began = Instant::now();
    loop {
        match tokio::time::timeout(NOTICED_WITHIN, stream.next()).await {
            Ok(Some(Ok(_))) => continue,
            Ok(Some(Err(error))) => {
                eprintln!("the watch failed: {error}");
                return began.elapsed();
            }
            Ok(None) => {
                eprintln!("the watch ended");
                return began.elapsed();
            }
            Err(elapsed) => panic!("the watch on a dead connection still waits ({elapsed})"),
        }
    }
}

/// A GET answered within a few seconds of the server being able to answer.
async fn read_back(api: &Api<ConfigMap>) {
    let began = Instant::now();
    loop {
        match tokio::time::timeout(Duration::from_secs(3), api.get("kept")).await {
            Ok(Ok(_)) => return,
            other if began.elapsed() > Duration::from_secs(20) => {
                panic!("no answer 20 s after the server came back: {other:?}")
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// GOAWAY: the server says one in fifty times that a connection takes no new streams; every
/// request still succeeds, on a fresh connection when it has to.
///
/// The server draws its GOAWAYs at random, so the reads go on, eight at a time, until one has
/// sent the client to a fresh connection (about fifty reads on average): a fixed count of reads
/// finds none once in a few thousand runs. A client that mishandles GOAWAY fails a read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_refused_by_goaway_are_sent_again_on_a_fresh_connection() {
    let control_plane = control_plane(
        "goaway",
        vec![(
            Component::ApiServer,
            format!("--goaway-chance={GOAWAY_CHANCE}"),
        )],
    );
    let (api, connections) = client_with_an_object(control_plane).await;
    let _watch = open_watch(&api).await;
    let before = connections.opened();
    let mut sent = 0;
    // At least 400 reads, so that reads after a fresh connection are checked too.
    while sent < 400 || connections.opened() == before {
        assert!(
            sent < MOST_GOAWAY_READS,
            "{sent} reads at a GOAWAY chance of {GOAWAY_CHANCE} opened no new connection"
        );
        let reads: Vec<Result<ConfigMap, String>> = futures::stream::iter(0..8)
            .map(|_| async {
                match tokio::time::timeout(Duration::from_secs(10), api.get("kept")).await {
                    Ok(read) => read.map_err(|error| format!("{error:?}")),
                    Err(_) => Err("no answer within 10 s".to_string()),
                }
            })
            .buffer_unordered(8)
            .collect()
            .await;
        sent += reads.len();
        let failed: Vec<&String> = reads
            .iter()
            .filter_map(|read| read.as_ref().err())
            .collect();
        assert!(
            failed.is_empty(),
            "requests failed on GOAWAY after {sent} reads: {failed:?}"
        );
    }
    eprintln!(
        "{sent} reads opened {} fresh connections",
        connections.opened() - before
    );
}

/// Half-open, then RST: a watch on a dead connection fails, and the server is reached again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_connection_takes_its_watches_with_it_and_the_next_request_finds_the_server() {
    let control_plane = control_plane("connections", Vec::new());
    let (api, connections) = client_with_an_object(control_plane).await;

    // Half-open: the server frozen, its TCP still up. The PINGs on the watch's connection go
    // unanswered: the connection is given up and its watch fails. (An idle connection is not
    // PINGed; once the server answers again it is as good as before.)
    let mut watch = open_watch(&api).await;
    let open = connections.open();
    fault(control_plane, |cp| cp.pause(Component::ApiServer)).await;
    let noticed = until_broken(&mut watch).await;
    let began = Instant::now();
    while connections.open() >= open && began.elapsed() < Duration::from_secs(2) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let still_open = connections.open();
    fault(control_plane, |cp| cp.resume(Component::ApiServer)).await;
    assert!(
        still_open < open,
        "the silent connection was kept ({open} open before, {still_open} after, watch broken after {noticed:?})"
    );
    assert!(
        noticed >= KEEP_ALIVE,
        "the watch broke before a PING could go unanswered: {noticed:?}"
    );
    read_back(&api).await;
    eprintln!("half-open connection given up after {noticed:?}");

    // RST: the server killed. Its connections are reset: the watch fails at once, and the
    // restarted server is reached on a fresh connection.
    watch = open_watch(&api).await;
    let before = connections.opened();
    fault(control_plane, |cp| cp.kill(Component::ApiServer)).await;
    let noticed = until_broken(&mut watch).await;
    assert!(
        noticed < Duration::from_secs(2),
        "a reset connection noticed after {noticed:?}"
    );
    fault(control_plane, |cp| {
        cp.restart(Component::ApiServer).map(drop)
    })
    .await;
    read_back(&api).await;
    assert!(connections.opened() > before);
}

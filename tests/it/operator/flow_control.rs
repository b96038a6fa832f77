//! deploy/components/flow-control on a real API server: its PriorityLevelConfiguration and
//! FlowSchema are accepted, the FlowSchema wins over the built-in ones that would otherwise take
//! nmo's requests, and every request nmo makes during a maintenance is classified under it. Real
//! backend only: API Priority and Fairness is the API server's (the simulator has none).
//!
//! nmo runs as its ServiceAccount `nmo-system/nmo` on the real backend (tests/it/support/real),
//! the subject the shipped FlowSchema names, so the test exercises the files as shipped. What it
//! counts: the API server's `apiserver_flowcontrol_dispatched_requests_total` and
//! `apiserver_flowcontrol_rejected_requests_total` of the FlowSchema and its priority level,
//! against nmo's requests in the audit log (the binary's audit policy logs nmo's user and no
//! other). With the subject changed to another ServiceAccount, nmo's requests go to the built-in
//! `service-accounts` FlowSchema (workload-low) and the test fails.
//!
//! And with the level cut small enough to throttle nmo (one share, nothing lent or borrowed,
//! one queue of two), several maintenances at once still succeed and flow control refuses
//! fewer than one request of nmo in ten: nmo reads the `Retry-After` of the API server's
//! plain-text 429 (`api_client::retry_after`), holds every request of its client until that
//! wait has passed (`api_client::flow_hold`), and halves its evictions in flight on each
//! throttling pause (the eviction actor's `concurrency`), where it used to come back at full
//! concurrency into the same few seats.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use nmo_devtools::bench::server_cost::FlowCounts;
use nmo_sim::Scenario;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::support::{Backend, Operator, TestEnv, eventually, test_options};

/// The response header naming the FlowSchema that classified a request.
const FLOW_SCHEMA_UID_HEADER: &str = "x-kubernetes-pf-flowschema-uid";
/// The built-in FlowSchema that takes every service account's requests without the component.
const SERVICE_ACCOUNTS_SCHEMA: &str = "service-accounts";
/// The field manager of the test's apply.
const MANAGER: &str = "nmo-it-flow-control";
/// The API server's nominal seats of a priority level.
const NOMINAL_SEATS: &str = "apiserver_flowcontrol_nominal_limit_seats";

fn component() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/components/flow-control")
}

/// The one object of `file` in the component, typed.
fn shipped<T: DeserializeOwned>(file: &str) -> T {
    let path = component().join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("reading {}: {error}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// Deletes the component's objects when dropped (the test passed or not), so that no later test
/// of the binary runs with them; on its own runtime, since a drop cannot await.
struct Removed {
    /// The admin's kubeconfig: a client of the dropping thread's own runtime is built from it.
    admin_kubeconfig: PathBuf,
    schema: String,
    level: String,
    /// Where the kubeconfig is (removed after the objects).
    _scratch: tempfile::TempDir,
}

/// Applies `schema` and `level` as the admin (`accepted`: the API server accepts the level),
/// both removed again when the returned guard drops; then waits until a request of `nmo` (a
/// client with nmo's identity) is classified under `schema`, as the API server takes new
/// flow-control objects up asynchronously.
async fn apply_flow_control(
    env: &TestEnv,
    schema: &FlowSchema,
    level: &PriorityLevelConfiguration,
    accepted: &str,
    nmo: &kube::Client,
) -> Removed {
    let admin = env.admin_client();
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let admin_kubeconfig = scratch.path().join("admin.kubeconfig");
    env.write_admin_kubeconfig(&admin_kubeconfig);
    let removed = Removed {
        admin_kubeconfig,
        schema: schema.metadata.name.clone().expect("a name"),
        level: level.metadata.name.clone().expect("a name"),
        _scratch: scratch,
    };
    let apply = PatchParams::apply(MANAGER).force();
    Api::<PriorityLevelConfiguration>::all(admin.clone())
        .patch(&removed.level, &apply, &Patch::Apply(level))
        .await
        .expect(accepted);
    let applied = Api::<FlowSchema>::all(admin)
        .patch(&removed.schema, &apply, &Patch::Apply(schema))
        .await
        .expect("the API server accepts the FlowSchema");
    let uid = applied.metadata.uid.clone().expect("a uid");
    eventually(
        "a request of nmo's ServiceAccount to be classified under the shipped FlowSchema",
        Duration::from_secs(30),
        async || classified_as(nmo).await.as_deref() == Some(uid.as_str()),
    )
    .await;
    removed
}

impl Removed {
    async fn now(admin: kube::Client, schema: &str, level: &str) {
        let schemas = Api::<FlowSchema>::all(admin.clone());
        let levels = Api::<PriorityLevelConfiguration>::all(admin);
        let report = |what: &str, result: Result<_, kube::Error>| match result {
            Ok(()) => {}
            // Absent is fine: nothing to remove.
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => eprintln!("removing the {what}: {error}"),
        };
        report(
            "FlowSchema",
            schemas
                .delete(schema, &DeleteParams::default())
                .await
                .map(|_| ()),
        );
        report(
            "PriorityLevelConfiguration",
            levels
                .delete(level, &DeleteParams::default())
                .await
                .map(|_| ()),
        );
    }
}

impl Drop for Removed {
    fn drop(&mut self) {
        let kubeconfig = self.admin_kubeconfig.clone();
        let (schema, level) = (self.schema.clone(), self.level.clone());
        let removed = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the clean-up");
            runtime.block_on(async {
                let config = async {
                    let kubeconfig = kube::config::Kubeconfig::read_from(&kubeconfig).ok()?;
                    let options = kube::config::KubeConfigOptions::default();
                    kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                        .await
                        .ok()
                };
                if let Some(client) = config.await.and_then(|c| kube::Client::try_from(c).ok()) {
                    Removed::now(client, &schema, &level).await;
                }
            });
        })
        .join();
        if removed.is_err() {
            eprintln!("removing the flow-control objects failed; the next run replaces them");
        }
    }
}

/// The API server's metrics as text (the admin may read them).
async fn metrics(admin: &kube::Client) -> String {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("a request");
    admin
        .request_text(request)
        .await
        .expect("the API server's /metrics")
}

/// The FlowSchema uid the API server names in its answer to a request of `client`.
async fn classified_as(client: &kube::Client) -> Option<String> {
    let request = http::Request::get("/api/v1/nodes?limit=1")
        .body(kube::client::Body::empty())
        .expect("a request");
    let response = client.send(request).await.ok()?;
    response
        .headers()
        .get(FLOW_SCHEMA_UID_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_string)
}

/// The nominal seats the API server gives `level` (for the report: no Prometheus parser here
/// has gauges with their labels but this line's).
fn nominal_seats(text: &str, level: &str) -> Option<f64> {
    let label = format!("priority_level=\"{level}\"");
    text.lines()
        .find(|line| line.starts_with(NOMINAL_SEATS) && line.contains(&label))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nmo_s_requests_go_through_the_shipped_flow_schema_real() {
    let mut env = TestEnv::on(Backend::Real)
        .budgeted_nodes(2, 4)
        .start_idle()
        .await;
    let admin = env.admin_client();
    let schema: FlowSchema = shipped("flowschema.yaml");
    let level: PriorityLevelConfiguration = shipped("prioritylevelconfiguration.yaml");
    let schema_name = schema.metadata.name.clone().expect("a name");
    let level_name = level.metadata.name.clone().expect("a name");
    assert_eq!(
        schema
            .spec
            .as_ref()
            .map(|s| &s.priority_level_configuration.name),
        Some(&level_name),
        "the FlowSchema names the component's priority level"
    );

    // It must win over the built-in FlowSchema nmo's requests go to without it.
    let schemas = Api::<FlowSchema>::all(admin.clone());
    let service_accounts = schemas
        .get(SERVICE_ACCOUNTS_SCHEMA)
        .await
        .expect("the built-in service-accounts FlowSchema");
    let precedence = |s: &FlowSchema| s.spec.as_ref().and_then(|s| s.matching_precedence);
    assert!(
        precedence(&schema) < precedence(&service_accounts),
        "{:?} does not come before service-accounts' {:?}",
        precedence(&schema),
        precedence(&service_accounts)
    );

    // Wait until a request of nmo's identity is classified under ours, as its answer's header
    // says.
    let _removed = apply_flow_control(
        &env,
        &schema,
        &level,
        "the API server accepts the PriorityLevelConfiguration",
        &env.operator_client(),
    )
    .await;

    env.forget_operator_requests();
    let before = metrics(&admin).await;
    env.start_operator();
    env.maintain("nm-0", "node-0").await;
    env.stop_cleanly().await;
    let after = metrics(&admin).await;

    let flow = (schema_name.clone(), level_name.clone());
    let before = FlowCounts::parse(&before).expect("the metrics parse");
    let after_counts = FlowCounts::parse(&after).expect("the metrics parse");
    let counted = |of: fn(&FlowCounts) -> &std::collections::BTreeMap<(String, String), f64>| {
        let at = |counts: &FlowCounts| of(counts).get(&flow).copied().unwrap_or(0.0);
        at(&after_counts) - at(&before)
    };
    let dispatched = counted(|c| &c.dispatched);
    let rejected = counted(|c| &c.rejected);
    let nmo_requests = env.operator_requests().len() as f64;
    assert!(nmo_requests > 0.0, "nmo made no request");
    // Every request of nmo was dispatched or refused under ours, and ours took nobody else's.
    assert_eq!(
        dispatched + rejected,
        nmo_requests,
        "nmo made {nmo_requests} requests, {dispatched} were dispatched and {rejected} rejected \
         under {schema_name}/{level_name}; all flows: {:?}",
        after_counts.dispatched
    );
    // A maintenance of a few pods does not come near the level's limits.
    assert_eq!(rejected, 0.0, "flow control refused nmo");
    eprintln!(
        "flow control: {dispatched} requests of nmo under {schema_name}/{level_name}, \
         {} nominal seats",
        nominal_seats(&after, &level_name)
            .map_or_else(|| "unknown".to_string(), |seats| seats.to_string())
    );
}

/// Nodes of the throttled test, and how many of them are maintained at once.
const THROTTLED_NODES: usize = 10;
const THROTTLED_MAINTENANCES: usize = 8;
const THROTTLED_PODS_PER_NODE: usize = 10;
/// The share of nmo's evictions flow control may refuse (the target of the scale work).
const MAX_REJECTED_EVICTIONS: f64 = 0.1;
/// The share of all of nmo's requests it may refuse: the maintenances' first steps (finalizers,
/// events, cordons, pod lists), 8 of each at once, are refused in part whatever the evictions
/// do; each is retried with its step's backoff.
const MAX_REJECTED_SHARE: f64 = 0.2;

/// The shipped priority level cut down until it throttles nmo: a single share (3 seats on a
/// default API server), none lent to or borrowed from other levels, one queue of two places.
fn throttling_level() -> PriorityLevelConfiguration {
    let mut level: Value = shipped("prioritylevelconfiguration.yaml");
    let limited = level["spec"]["limited"]
        .as_object_mut()
        .expect("a Limited level");
    limited.extend(fields(json!({
        "nominalConcurrencyShares": 1,
        "lendablePercent": 0,
        "borrowingLimitPercent": 0,
    })));
    let queuing = limited
        .get_mut("limitResponse")
        .and_then(|response| response["queuing"].as_object_mut())
        .expect("a queuing level");
    queuing.extend(fields(
        json!({"queues": 1, "handSize": 1, "queueLengthLimit": 2}),
    ));
    serde_json::from_value(level).expect("a PriorityLevelConfiguration")
}

/// The fields of a JSON object.
fn fields(object: Value) -> serde_json::Map<String, Value> {
    match object {
        Value::Object(fields) => fields,
        other => panic!("not an object: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_level_that_throttles_nmo_refuses_few_of_its_requests_and_the_drains_finish_real() {
    let env = TestEnv::on(Backend::Real)
        .scenario(Scenario::plain(THROTTLED_NODES, THROTTLED_PODS_PER_NODE).pdb(None))
        .start_idle()
        .await;
    let admin = env.admin_client();
    let schema: FlowSchema = shipped("flowschema.yaml");
    let level = throttling_level();
    let schema_name = schema.metadata.name.clone().expect("a name");
    let level_name = level.metadata.name.clone().expect("a name");

    // nmo's own client: its stack (no kube retry, the Retry-After layer) is what is tested.
    let options = test_options();
    let config = env.operator_config();
    let client_options = options.clone();
    let make_client = move || {
        nmo::api_client::operator_client::client(config, &client_options)
            .expect("nmo's client")
            .client
    };
    let nmo = make_client.clone()();
    let _removed = apply_flow_control(
        &env,
        &schema,
        &level,
        "the API server accepts the small PriorityLevelConfiguration",
        &nmo,
    )
    .await;
    eventually(
        "the API server to give the small level its few seats",
        Duration::from_secs(30),
        async || nominal_seats(&metrics(&admin).await, &level_name).is_some_and(|s| s <= 3.0),
    )
    .await;

    // The level throttles: a burst of lists is refused in part, and each refusal reaches nmo's
    // error handling with the server's Retry-After (a plain-text 429 on the wire).
    let pods = Api::<Pod>::all(nmo.clone());
    let everything = ListParams::default();
    // Each answer with the moment it arrived: the hold runs from the refusals, not from the
    // end of the burst (on a busy machine the last answers come long after the refusals).
    let burst = (0..40).map(|_| async {
        let answer = pods.list(&everything).await;
        (Instant::now(), answer)
    });
    let answers = futures::future::join_all(burst).await;
    let refused: Vec<_> = answers
        .iter()
        .filter_map(|(arrived, answer)| match answer {
            Err(kube::Error::Api(status)) if status.code == 429 => Some((*arrived, status)),
            _ => None,
        })
        .collect();
    assert!(
        !refused.is_empty(),
        "40 lists at once on a level of 3 seats and 2 queue places: none refused"
    );
    let retry_after: Vec<u32> = refused
        .iter()
        .map(|(_, status)| status.details.as_ref().map_or(0, |d| d.retry_after_seconds))
        .collect();
    assert!(
        retry_after.iter().all(|seconds| *seconds > 0),
        "a throttling 429 without its Retry-After: {:?}",
        refused.first()
    );
    eprintln!(
        "flow control: a burst of 40 lists, {} refused with Retry-After {:?} s",
        refused.len(),
        retry_after.first()
    );
    // The refusals hold the client's next request until their Retry-After has passed
    // (api_client::flow_hold): it is not sent into the level that just refused the burst.
    let last_refusal = refused
        .iter()
        .map(|(arrived, _)| *arrived)
        .max()
        .expect("a refusal");
    let asked = Instant::now();
    pods.list(&ListParams::default().limit(1))
        .await
        .expect("a list after the hold");
    let held = asked.elapsed();
    let after_refusal = last_refusal.elapsed();
    // A little less than the 1 s: the refusal reached the client a moment before its
    // future here saw it.
    assert!(
        after_refusal >= Duration::from_millis(900),
        "the request after the refused burst was answered {after_refusal:?} after the last \
         refusal (held {held:?}), within its 1 s Retry-After"
    );
    eprintln!("flow control: the next request was held {held:?}");
    // Let the level's queue drain before nmo starts.
    tokio::time::sleep(Duration::from_secs(2)).await;

    // nmo's start-up (its rights checked, its watches opened) is over before the drains are
    // counted: what is measured is what the maintenances ask.
    let at_start = FlowCounts::parse(&metrics(&admin).await).expect("the metrics parse");
    let operator = Operator::start(make_client, options);
    tokio::time::sleep(Duration::from_secs(5)).await;
    env.forget_operator_requests();
    let before = FlowCounts::parse(&metrics(&admin).await).expect("the metrics parse");
    let flow = (schema_name.clone(), level_name.clone());
    let rejected_at_start_up = before.rejected.get(&flow).copied().unwrap_or(0.0)
        - at_start.rejected.get(&flow).copied().unwrap_or(0.0);
    let started = Instant::now();
    let maintenances: Vec<String> = (0..THROTTLED_MAINTENANCES)
        .map(|i| format!("nm-{i}"))
        .collect();
    for (i, name) in maintenances.iter().enumerate() {
        env.create_maintenance(name, &format!("node-{i}")).await;
    }
    for name in &maintenances {
        env.wait_succeeded(name).await;
    }
    let drained = started.elapsed();
    operator.stop().await.expect("clean stop");
    let after = FlowCounts::parse(&metrics(&admin).await).expect("the metrics parse");

    let counted = |of: fn(&FlowCounts) -> &std::collections::BTreeMap<(String, String), f64>| {
        let at = |counts: &FlowCounts| of(counts).get(&flow).copied().unwrap_or(0.0);
        at(&after) - at(&before)
    };
    let dispatched = counted(|c| &c.dispatched);
    let rejected = counted(|c| &c.rejected);
    let requests = env.operator_requests();
    let evictions = requests
        .iter()
        .filter(|(_, resource, _)| resource == "pods/eviction")
        .count();
    let throttled = env.operator_throttled_requests();
    let throttled_evictions = throttled.iter().filter(|r| *r == "pods/eviction").count();
    let pods = THROTTLED_MAINTENANCES * THROTTLED_PODS_PER_NODE;
    let share = throttled.len() as f64 / requests.len().max(1) as f64;
    let eviction_share = throttled_evictions as f64 / evictions.max(1) as f64;
    eprintln!(
        "flow control: {THROTTLED_MAINTENANCES} maintenances x {THROTTLED_PODS_PER_NODE} pods \
         drained in {drained:?}; nmo made {} requests, {} refused with 429 ({share:.3} per \
         request), {evictions} evictions for {pods} pods, {throttled_evictions} refused \
         ({eviction_share:.3} per eviction); {dispatched} dispatched and {rejected} rejected \
         under {schema_name}/{level_name}; {rejected_at_start_up} rejected at nmo's start-up",
        requests.len(),
        throttled.len()
    );
    assert!(evictions >= pods, "{evictions} evictions for {pods} pods");
    assert!(
        eviction_share < MAX_REJECTED_EVICTIONS,
        "flow control refused {throttled_evictions} of nmo's {evictions} evictions \
         ({eviction_share:.3} per eviction)"
    );
    assert!(
        share < MAX_REJECTED_SHARE,
        "flow control refused {} of nmo's {} requests ({share:.3} per request): {throttled:?}",
        throttled.len(),
        requests.len()
    );
}

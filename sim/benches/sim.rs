//! Throughput of the simulated API server through the real kube client, so that it is known not
//! to be the bottleneck of nmo's benchmarks. Prints figures; asserts nothing.
//!
//! `cargo bench -p nmo-sim --bench sim` (env SIM_NODES, SIM_PODS, SIM_SECS, SIM_CONCURRENCY to change the
//! defaults 2000, 30, 3, 32).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, EvictParams, ListParams, Patch, PatchParams};
use nmo_sim::{Query, Scenario, SimConfig, Simulator};
use serde_json::json;

/// Bytes in a MiB.
const MIB: f64 = 1_048_576.0;

fn env(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|x| x.parse::<f64>().ok())
            })
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Runs `op` from `conc` tasks for `secs` seconds; returns requests per second.
async fn measure<F, Fut>(name: &str, conc: usize, secs: u64, op: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let op = Arc::new(op);
    let done = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(AtomicUsize::new(0));
    let end = Instant::now() + Duration::from_secs(secs);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..conc {
        let (op, done, errors) = (op.clone(), done.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = t;
            while Instant::now() < end {
                if op(i).await {
                    done.fetch_add(1, Ordering::Relaxed);
                } else {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                i += conc;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let n = done.load(Ordering::Relaxed);
    let rate = n as f64 / start.elapsed().as_secs_f64();
    println!(
        "{name:<34} {rate:>9.0} req/s  ({n} ok, {} errors, {conc} concurrent; RSS {:.0} MiB)",
        errors.load(Ordering::Relaxed),
        rss_mib()
    );
    rate
}

#[tokio::main]
async fn main() {
    // Over 80 lines: the benchmark's one sequence (seed, then each request mix in the order it
    // prints); split, the printed order would be spread over as many functions.
    let nodes = env("SIM_NODES", 2000);
    let per_node = env("SIM_PODS", 30);
    let secs = env("SIM_SECS", 3) as u64;
    let conc = env("SIM_CONCURRENCY", 32);
    let t = Instant::now();
    // maxUnavailable 100%: evictions go through the PDB path without being refused.
    let scenario = Scenario::new(nodes, per_node).pdb(Some(json!({"maxUnavailable": "100%"})));
    let mut cfg = SimConfig::default().scenario(scenario);
    cfg.controllers = env("SIM_CONTROLLERS", 1) == 1;
    cfg.history_limit = env("SIM_HISTORY", 5000);
    let sim = Simulator::start(cfg).await.expect("simulator");
    let (objects, bytes) = sim.store().stats();
    println!(
        "seeded {nodes} nodes x {per_node} pods in {:.2}s: {objects} objects, {:.0} MiB JSON, RSS {:.0} MiB",
        t.elapsed().as_secs_f64(),
        bytes as f64 / MIB,
        rss_mib()
    );
    let client = sim.kube_client().expect("client");
    let nodes_api: Api<Node> = Api::all(client.clone());
    let pods_all: Api<Pod> = Api::all(client.clone());
    let n = nodes;
    let a = nodes_api.clone();
    measure("GET node (~12 KiB)", conc, secs, move |i| {
        let a = a.clone();
        async move { a.get(&format!("node-{}", i % n)).await.is_ok() }
    })
    .await;
    let a = pods_all.clone();
    measure("LIST pods spec.nodeName=<node>", conc, secs, move |i| {
        let a = a.clone();
        async move {
            a.list(&ListParams::default().fields(&format!("spec.nodeName=node-{}", i % n)))
                .await
                .is_ok()
        }
    })
    .await;
    let a = nodes_api.clone();
    measure("PATCH node (strategic merge)", conc, secs, move |i| {
        let a = a.clone();
        async move {
            let p = json!({"metadata": {"labels": {"bench": i.to_string()}}});
            a.patch(
                &format!("node-{}", i % n),
                &PatchParams::default(),
                &Patch::Strategic(&p),
            )
            .await
            .is_ok()
        }
    })
    .await;
    let victims: Vec<String> = sim
        .names("", "pods", "workloads")
        .into_iter()
        .filter(|n| n.starts_with("app-"))
        .collect();
    let victims = Arc::new(victims);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "workloads");
    let next = Arc::new(AtomicUsize::new(0));
    let v = victims.clone();
    measure("POST eviction (PDB path)", conc, secs, move |_| {
        let (pods, v, next) = (pods.clone(), v.clone(), next.clone());
        async move {
            let i = next.fetch_add(1, Ordering::Relaxed);
            match v.get(i) {
                Some(name) => pods.evict(name, &EvictParams::default()).await.is_ok(),
                None => false,
            }
        }
    })
    .await;
    let (objects, bytes) = sim.store().stats();
    let (events, hbytes) = sim.store().history_stats();
    println!(
        "requests served: {}, RSS {:.0} MiB; store {objects} objects / {:.0} MiB, watch history {events} events / {:.0} MiB",
        sim.requests(&Query::all()),
        rss_mib(),
        bytes as f64 / MIB,
        hbytes as f64 / MIB
    );
    sim.shutdown().await;
}

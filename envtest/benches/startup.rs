//! What a real control plane costs: start time of etcd + kube-apiserver, then with the
//! controller manager and scheduler, and the memory of each component once ready and after a
//! little work (100 namespaces and 20 nodes). Prints figures; asserts nothing about them.
//!
//! `cargo bench -p nmo-envtest --bench startup` (`KUBEBUILDER_ASSETS` as for the tests;
//! `-- --runs N` repeats each start N times, default 1).

use std::time::Instant;

use k8s_openapi::api::core::v1::Namespace;
use nmo_envtest::{ControlPlane, NodeTemplate, Options};

fn mib(bytes: Option<u64>) -> String {
    bytes
        .map(|bytes| format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0)))
        .unwrap_or_else(|| "?".into())
}

fn report_startup(label: &str, control_plane: &ControlPlane, wall: std::time::Duration) {
    println!("{label}: ready in {:.2} s", wall.as_secs_f64());
    for startup in control_plane.startup() {
        println!(
            "  {:<24} started in {:.2} s",
            startup.component.to_string(),
            startup.took.as_secs_f64()
        );
    }
    report_memory(control_plane);
}

fn report_memory(control_plane: &ControlPlane) {
    for component in control_plane.components() {
        println!(
            "  {:<24} rss {:>10}  peak {:>10}",
            component.component.to_string(),
            mib(component.rss),
            mib(component.peak_rss)
        );
    }
}

/// 100 namespaces and 20 nodes: enough traffic for the caches to fill.
fn exercise(control_plane: &ControlPlane) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let client = control_plane.admin_client().expect("an admin client");
        let namespaces: kube::Api<Namespace> = kube::Api::all(client);
        for n in 0..100 {
            let namespace: Namespace = serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("bench-{n}")}
            }))
            .expect("a namespace");
            namespaces
                .create(&Default::default(), &namespace)
                .await
                .expect("a namespace is created");
        }
        for n in 0..20 {
            control_plane
                .register(NodeTemplate::new(format!("bench-node-{n}")))
                .await
                .expect("a node is registered");
        }
    });
}

fn main() {
    let runs: usize = std::env::args()
        .skip_while(|arg| arg != "--runs")
        .nth(1)
        .and_then(|runs| runs.parse().ok())
        .unwrap_or(1);
    println!(
        "machine: {} cores; assets: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        nmo_envtest::assets_dir(None)
            .map(|dir| dir.display().to_string())
            .unwrap_or_else(|error| error.to_string())
    );
    for run in 1..=runs {
        for (label, options) in [
            ("etcd + kube-apiserver", Options::api_only()),
            ("all four components", Options::default()),
        ] {
            let began = Instant::now();
            let control_plane = ControlPlane::start(options).expect("the control plane starts");
            let wall = began.elapsed();
            report_startup(&format!("run {run}, {label}"), &control_plane, wall);
            exercise(&control_plane);
            println!("  after 100 namespaces and 20 nodes:");
            report_memory(&control_plane);
            let stopping = Instant::now();
            drop(control_plane);
            println!("  stopped in {:.2} s", stopping.elapsed().as_secs_f64());
        }
    }
}

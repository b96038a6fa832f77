//! Conformance tests of the simulated API server.

mod cluster;
mod common;
mod crud;
mod events;
mod eviction;
mod hooks;
mod kubectl;
mod misc;
mod patch;
mod scale;
mod watch;

/// Not a test: serves a simulator for manual poking (`cargo test --test it sim::serve -- --ignored --nocapture`).
#[tokio::test]
#[ignore]
async fn serve_for_manual_poking() {
    let sim = common::start(Some(nmo::sim::Scenario::new(3, 8)), 0.05).await;
    let p = std::path::Path::new("/tmp/sim-poke.kubeconfig");
    sim.write_kubeconfig(p).unwrap();
    println!("serving at {}", sim.base_url());
    tokio::time::sleep(std::time::Duration::from_secs(
        std::env::var("POKE_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(120),
    ))
    .await;
}

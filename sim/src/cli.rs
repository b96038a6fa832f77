//! `nmo sim`: a standalone simulator serving until Ctrl-C.

use std::path::PathBuf;

use serde_json::Value;

use crate::errors::SimError;
use crate::scenario::Scenario;
use crate::simulator::{SimConfig, Simulator, default_kubeconfig_path};

/// Arguments of the standalone simulator.
#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    /// Number of nodes to seed.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Pods per node.
    #[arg(long, default_value_t = 10)]
    pub pods_per_node: usize,
    /// Port on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Where to write the kubeconfig.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// CRD manifests (YAML or JSON) to install at start.
    #[arg(long = "crd")]
    pub crds: Vec<PathBuf>,
    /// Time scale of the simulated cluster (1.0: real time, 0: instant).
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
}

/// Serves until Ctrl-C.
pub async fn run(args: SimArgs) -> Result<(), SimError> {
    run_with_crds(args, Vec::new()).await
}

/// Serves until Ctrl-C with extra CRDs (e.g. the NodeMaintenance CRD object as JSON).
pub async fn run_with_crds(args: SimArgs, crds: Vec<Value>) -> Result<(), SimError> {
    let mut config = SimConfig::default()
        .scenario(Scenario::new(args.nodes, args.pods_per_node))
        .time_scale(args.time_scale);
    config.port = args.port;
    config.crds = crds;
    for p in &args.crds {
        let text = std::fs::read_to_string(p)?;
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let v = <Value as serde::Deserialize>::deserialize(doc)?;
            if v.get("kind").and_then(|k| k.as_str()) == Some("CustomResourceDefinition") {
                config.crds.push(v);
            }
        }
    }
    let sim = Simulator::start(config).await?;
    let path = args
        .kubeconfig
        .clone()
        .unwrap_or_else(default_kubeconfig_path);
    sim.write_kubeconfig(&path)?;
    println!("simulated API server at {}", sim.base_url());
    println!(
        "kubeconfig written to {} (export KUBECONFIG={})",
        path.display(),
        path.display()
    );
    let _ = tokio::signal::ctrl_c().await;
    sim.shutdown().await;
    Ok(())
}

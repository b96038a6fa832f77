//! `nmo demo` end to end with small numbers: every maintenance succeeds, every node comes back.

use std::time::Duration;

use nmo_devtools::demo::{self, DemoOptions, Display};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_drains_every_node_then_restores_it() {
    let options = DemoOptions {
        nodes: 4,
        pods_per_node: 8,
        maintenance: 2,
        pdb_max_unavailable: 1,
        kubelet_speed: 0.0,
        keep: false,
        timeout_secs: 60,
    };
    let mut out: Vec<u8> = Vec::new();
    let report = tokio::time::timeout(
        Duration::from_secs(90),
        demo::run(&options, Display::Quiet, &mut out, async {}),
    )
    .await
    .expect("the demo finishes")
    .expect("the demo runs");
    let text = String::from_utf8_lossy(&out);
    eprintln!("{text}");

    assert_eq!(report.rows.len(), 2, "one row per maintenance");
    assert!(report.all_succeeded(), "every maintenance succeeded");
    assert!(
        report.rows.iter().all(|r| r.time_to_drained.is_some()),
        "each drain was timed"
    );
    assert!(
        report.rows.iter().all(|r| r.pods_evicted > 0),
        "each drain evicted pods"
    );
    assert_eq!(report.restored.len(), 2);
    assert!(
        report.all_restored(),
        "every node restored: {:?}",
        report.restored
    );
    assert!(report.requests.evictions > 0, "nmo's requests were counted");
    assert!(
        text.contains("Succeeded"),
        "the summary table shows the phases"
    );
    assert!(text.contains("restored"), "the restore table is printed");
}

#[tokio::test]
async fn impossible_options_are_refused_before_anything_starts() {
    let options = DemoOptions {
        nodes: 2,
        maintenance: 2,
        ..DemoOptions::default()
    };
    let mut out: Vec<u8> = Vec::new();
    let outcome = demo::run(&options, Display::Quiet, &mut out, async {}).await;
    assert!(matches!(outcome, Err(demo::DemoError::Options(_))));
}

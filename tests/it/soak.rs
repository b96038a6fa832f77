//! The fault soak at CI size (`nmo bench --scenario soak-ci`): NodeMaintenances created and
//! deleted while the simulated API server answers a tenth of nmo's requests with 500/409/429,
//! drops its watches and answers some requests after their deadline, and the leading replica
//! (a real `nmo run` child process) is killed with SIGKILL, the writes it sends in its last
//! moment delivered after its successor took over; meanwhile a person's cordon loses its record
//! mid-maintenance, another operator holds a node lease with its clock ahead of nmo's, and a
//! DaemonSet is created again under the same name; then the API server restarts (connections
//! dropped, 503 for 5 s, 410 on every resumed watch). Every check of the soak must hold. The
//! full-size run is `nmo bench --scenario soak`; its figures are in docs/performance.md.

use std::path::Path;

use nmo_devtools::bench::soak::{SoakConfig, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ci_sized_fault_soak_passes_every_check() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let report = run(
        &SoakConfig::ci(),
        Path::new(env!("CARGO_BIN_EXE_nmo")),
        dir.path(),
    )
    .await
    .expect("the soak runs");
    println!("{report}");
    assert!(report.passed(), "{report}");
    assert_eq!(report.replicas.kills, 1);
    assert_eq!(report.recoveries.first_s.len(), 1, "one restart, timed");
}

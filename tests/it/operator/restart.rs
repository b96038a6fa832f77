//! Crash safety: an operator killed mid-drain leaves a state the next one finishes from.

use super::node_0_blocked;
use crate::support::{Backend, both_backends, taint_keys};

async fn a_new_operator_finishes_what_a_killed_one_started(backend: Backend) {
    // The drain is under way and blocked.
    let mut env = node_0_blocked(backend).await;
    env.kill_operator().await;
    let progress_before =
        env.maintenance("nm-0").await.expect("exists")["status"]["drainProgress"].clone();

    // The budget is relaxed while no operator runs; the next one picks the drain up.
    env.relax_pdb("precious", "db-budget", 0).await;
    env.start_operator();
    env.wait_succeeded("nm-0").await;
    let status = env.maintenance("nm-0").await.expect("exists")["status"].clone();
    assert!(
        status["drainProgress"].as_i64() >= progress_before.as_i64(),
        "progress never goes back"
    );
    assert_eq!(status["drainProgress"], 100);
    assert!(!env.pod_exists("precious", "db-0").await);
    assert_eq!(env.node("node-0").await["spec"]["unschedulable"], true);

    // And a kill during the undo is finished by the next operator too.
    env.delete_maintenance("nm-0").await;
    env.kill_operator().await;
    env.start_operator();
    env.wait_gone("nm-0").await;
    let node = env.node("node-0").await;
    assert_ne!(node["spec"]["unschedulable"], true);
    assert!(taint_keys(&node).is_empty(), "{:?}", taint_keys(&node));
    assert!(env.lease("node-0").await.is_none());
    env.stop_cleanly().await;
}

both_backends!(a_new_operator_finishes_what_a_killed_one_started,);

//! Results that come back late (the work was out when the maintenance moved on) never lead out
//! of `Failed` or `Undoing`. The late results are injected as the messages they would be.

use ractor::ActorRef;

use super::*;
use crate::node::{NodeMsg, OpResult, ReconcileOutcome, Reconciled};

/// The one node actor.
fn node_actor(h: &Harness) -> ActorRef<NodeMsg> {
    let children = h.supervisor().get_children();
    assert_eq!(children.len(), 1, "one node actor");
    children[0].clone().into()
}

fn late(fresh: Option<Maintenance>, outcome: ReconcileOutcome) -> NodeMsg {
    NodeMsg::Op(OpResult::Reconciled(Box::new(Reconciled {
        fresh,
        finalizer_added: false,
        initial: None,
        marked_for_this: false,
        outcome: Ok(outcome),
    })))
}

#[tokio::test(start_paused = true)]
async fn a_late_reconcile_result_does_not_revive_a_failed_maintenance() {
    let (cluster, h) = succeeded_with_renewals_every_10s().await;
    // Renewals fail until it gives up (a failure counts once per renewal interval).
    cluster.fail_next("update_lease", transient(1000));
    assert!(h.wait_failed("nm1", Duration::from_secs(120)).await);
    assert!(wait_uncordoned(&cluster, "n1", Duration::from_secs(10)).await);
    // A repair reconcile that was out when the maintenance gave up reports back.
    let ready = ReconcileOutcome::Ready {
        node: cluster.node("n1").unwrap(),
        lease: Lease::test("n1", LEASE_HOLDER),
        finding: None,
    };
    node_actor(&h).cast(late(None, ready)).unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(phase(&cluster, "nm1"), Some(Phase::Failed));
    assert_released(&cluster, "n1");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_late_re_read_does_not_stop_an_undo() {
    let (cluster, h) = nm1_succeeded(1, Duration::from_secs(30)).await;
    let before_deletion = cluster.maintenance("nm1").unwrap();
    cluster.fail_next(
        "remove_finalizer",
        vec![ClusterError::Transient("etcd timeout".into())],
    );
    cluster.delete_maintenance("nm1");
    assert!(
        h.wait_calls("remove_finalizer", |n| n >= 1, Duration::from_secs(10))
            .await
    );
    // A re-read from before the deletion reports back, saying Failed.
    let stale = Maintenance {
        status: Some(MaintenanceStatus {
            phase: Some(Phase::Failed),
            ..MaintenanceStatus::default()
        }),
        ..before_deletion
    };
    node_actor(&h)
        .cast(late(Some(stale), ReconcileOutcome::Skipped))
        .unwrap();
    assert!(h.wait_gone("nm1", Duration::from_secs(30)).await);
    assert_released(&cluster, "n1");
    h.stop().await;
}

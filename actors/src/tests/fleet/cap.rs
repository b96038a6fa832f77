//! The cap holds: under concurrent creates and deletes, after a restart of the actors, and
//! counting nodes someone else took out.

use super::*;

#[tokio::test(start_paused = true)]
async fn the_cap_holds_under_concurrent_creates_and_deletes() {
    let cluster = nodes(12);
    let monitor = CordonMonitor::start(&cluster);
    let h = Harness::paused(&cluster, parallel(3)).await;
    let names: Vec<String> = (0..12).map(|i| format!("nm-{i}")).collect();
    // Creates and deletes interleaved: some are deleted while waiting, some while draining,
    // some once Succeeded; deleted ones are created again later.
    let churn = {
        let cluster = cluster.clone();
        let names = names.clone();
        tokio::spawn(async move {
            for round in 0..3_i64 {
                for (i, name) in names.iter().enumerate() {
                    if cluster.maintenance(name).is_none() {
                        let created = at(round * 100 + i64::try_from(i).unwrap());
                        cluster.create_maintenance(name, &format!("n{i}"), created);
                    }
                    if (i + usize::try_from(round).unwrap()) % 3 == 0 {
                        tokio::time::sleep(Duration::from_millis(7)).await;
                    }
                }
                for (i, name) in names.iter().enumerate() {
                    if (i * 7 + usize::try_from(round).unwrap()) % 4 == 0 {
                        cluster.delete_maintenance(name);
                    }
                    tokio::time::sleep(Duration::from_millis(3)).await;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    churn.await.unwrap();
    // Then everyone that is left is let through: delete each as it succeeds.
    let all_done = async {
        loop {
            let mut left = 0;
            for name in &names {
                match cluster.maintenance(name) {
                    Some(nm)
                        if nm.status.as_ref().and_then(|s| s.phase) == Some(Phase::Succeeded) =>
                    {
                        if !nm.deleting {
                            cluster.delete_maintenance(name);
                        }
                        left += 1;
                    }
                    Some(_) => left += 1,
                    None => {}
                }
            }
            if left == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(120), all_done)
        .await
        .expect("every maintenance ran and was deleted");
    assert!(monitor.max() >= 3, "the budget was used: {}", monitor.max());
    assert!(
        monitor.max() <= 3,
        "never more than 3 nodes out at once: {}",
        monitor.max()
    );
    for i in 0..12 {
        let n = cluster.node(&format!("n{i}")).unwrap();
        assert!(!n.unschedulable, "n{i} given back");
    }
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_budget_is_derived_from_the_cluster_after_a_restart() {
    let cluster = nodes(5);
    let monitor = CordonMonitor::start(&cluster);
    let h = Harness::paused(&cluster, parallel(2)).await;
    // The oldest two run; the waiting ones' names sort first, so after a restart they are
    // seen before those holding the slots.
    let names = ["z-0", "z-1", "a-2", "a-3", "a-4"];
    for (i, name) in names.iter().enumerate() {
        cluster.create_maintenance(name, &format!("n{i}"), at(i64::try_from(i).unwrap()));
    }
    assert!(h.wait_succeeded("z-1", Duration::from_secs(30)).await);
    assert!(eventually(Duration::from_secs(5), || queued(&cluster, "a-4")).await);
    h.stop().await;

    // One that had just started when nmo stopped: its finalizer is on, nothing else yet.
    let mut a2 = cluster.maintenance("a-2").unwrap();
    assert!(!a2.has_finalizer());
    a2.finalizers.push(crate::model::FINALIZER.to_string());
    cluster.put_maintenance(a2);

    // A new process knows nothing but the cluster: z-0, z-1 and a-2 hold slots (3 > 2, so
    // nobody starts), a-3 and a-4 keep waiting.
    let h = Harness::paused(&cluster, parallel(2)).await;
    assert!(h.wait_succeeded("a-2", Duration::from_secs(30)).await);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(h.queue().await, ["a-3", "a-4"]);
    assert!(!cluster.node("n3").unwrap().unschedulable);
    // Two deletions bring it under the cap: exactly one more starts.
    cluster.delete_maintenance("z-0");
    cluster.delete_maintenance("z-1");
    assert!(h.wait_succeeded("a-3", Duration::from_secs(30)).await);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(h.queue().await, ["a-4"]);
    assert_eq!(
        monitor.max(),
        3,
        "the two running plus the one started before the restart"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn unavailable_nodes_count_whoever_took_them_out() {
    let cluster = nodes(6);
    // n5 is NotReady and n4 cordoned by someone else: 2 of at most 3 nodes are out.
    cluster.set_node_ready("n5", false);
    set_unschedulable(&cluster, "n4", true);
    let h = Harness::paused(&cluster, |config: &mut Config| {
        config.fleet = FleetBudget {
            max_parallel: None,
            max_unavailable: Some(Limit::Count(3)),
        };
    })
    .await;
    cluster.create_maintenance("nm-0", "n0", at(0));
    cluster.create_maintenance("nm-1", "n1", at(1));
    // The NotReady node is counted once: its maintenance starts although the limit is reached.
    cluster.create_maintenance("nm-5", "n5", at(5));
    assert!(h.wait_succeeded("nm-0", Duration::from_secs(30)).await);
    assert!(eventually(Duration::from_secs(5), || queued(&cluster, "nm-1")).await);
    assert_eq!(
        cluster.status("nm-1").queue.unwrap().waiting_for,
        "max-unavailable-nodes: 3 of 3 unavailable"
    );
    // nm-5 is younger than nm-1, which waits: first in, first out.
    assert_eq!(h.queue().await, ["nm-1", "nm-5"]);
    // The NotReady node comes back: room for nm-1, then nm-5 (which takes n5 out again but
    // nothing more, as n5 is cordoned by then and counted once).
    cluster.set_node_ready("n5", true);
    assert!(h.wait_succeeded("nm-1", Duration::from_secs(30)).await);
    assert!(eventually(Duration::from_secs(5), || queued(&cluster, "nm-5")).await);
    // The other tool uncordons n4: nm-5 starts.
    set_unschedulable(&cluster, "n4", false);
    assert!(h.wait_succeeded("nm-5", Duration::from_secs(30)).await);
    h.stop().await;
}

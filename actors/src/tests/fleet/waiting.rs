//! NodeMaintenances beyond the budget wait touching nothing, oldest first, and start by
//! themselves when a slot frees.

use super::*;

#[tokio::test(start_paused = true)]
async fn beyond_the_budget_maintenances_wait_touching_nothing_and_start_when_a_slot_frees() {
    let cluster = nodes(4);
    let h = Harness::paused(&cluster, parallel(2)).await;
    for i in 0..4 {
        cluster.create_maintenance(&format!("nm-{i}"), &format!("n{i}"), at(i64::from(i)));
    }
    for name in ["nm-0", "nm-1"] {
        assert!(h.wait_succeeded(name, Duration::from_secs(30)).await);
    }
    assert!(
        eventually(Duration::from_secs(5), || queued(&cluster, "nm-2")
            && queued(&cluster, "nm-3"))
        .await
    );
    assert_eq!(h.queue().await, ["nm-2", "nm-3"]);
    for (name, node, position) in [("nm-2", "n2", 1), ("nm-3", "n3", 2)] {
        let nm = cluster.maintenance(name).unwrap();
        assert!(
            !nm.has_finalizer(),
            "a waiting maintenance has no finalizer"
        );
        let status = nm.status.unwrap();
        assert_eq!(status.phase, Some(Phase::Running));
        let place = status.queue.expect("its place in the queue");
        assert_eq!(place.position, position);
        assert_eq!(
            place.waiting_for,
            "max-parallel-maintenances: 2 of 2 running"
        );
        let n = cluster.node(node).unwrap();
        assert!(!n.unschedulable && n.taints.is_empty() && n.labels.is_empty());
        assert!(cluster.lease(NS, &format!("node-{node}")).is_none());
        // Nothing but its queue status write and its one event: no watch, no read.
        assert_eq!(
            calls_about(&cluster, name, node),
            [format!("write_status {name}")]
        );
    }
    let queued_events = cluster
        .events()
        .into_iter()
        .filter(|e| e.reason == "QueuedMaintenance")
        .count();
    assert_eq!(queued_events, 2, "one event each when queued");

    // Hours pass: still nothing more for the waiting ones (their place did not move).
    tokio::time::sleep(Duration::from_secs(3 * 3600)).await;
    assert_eq!(calls_about(&cluster, "nm-3", "n3"), ["write_status nm-3"]);

    // Succeeded keeps its slot; deleting it frees it, and the first in line starts at once.
    cluster.delete_maintenance("nm-0");
    assert!(h.wait_gone("nm-0", Duration::from_secs(10)).await);
    assert!(
        eventually(Duration::from_secs(1), || cluster
            .maintenance("nm-2")
            .unwrap()
            .has_finalizer())
        .await,
        "the next one starts within a second"
    );
    assert!(h.wait_succeeded("nm-2", Duration::from_secs(30)).await);
    let status = cluster.status("nm-2");
    assert_eq!(status.queue, None);
    let condition = decisions::condition(&status, conditions::QUEUED).unwrap();
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "Started")
    );
    assert_eq!(status.total_pods, 1, "counts taken when it started");
    let about_nm2: Vec<String> = cluster
        .events()
        .into_iter()
        .filter(|e| matches!(&e.target, EventTarget::Maintenance { name, .. } if name == "nm-2"))
        .map(|e| e.reason)
        .collect();
    assert_eq!(
        about_nm2[..2],
        ["QueuedMaintenance", "BeginMaintenance"],
        "one event when queued, one when started"
    );
    assert_eq!(status.eviction_pods, 1);
    assert_eq!(h.queue().await, ["nm-3"]);
    assert!(queued(&cluster, "nm-3"));
    h.stop().await;
}

/// A waiting maintenance let in by a freed slot starts at once: the start-up pacing is for
/// maintenances resumed after a restart, and a waiting one never started, even though its queue
/// status already says `Running`. (Paced as resumed, each start of a busy queue waited its
/// turn behind the others: up to a second at the default 20 starts a second.)
#[tokio::test(start_paused = true)]
async fn a_maintenance_let_in_from_the_queue_is_not_paced_as_a_resumed_one() {
    let cluster = nodes(3);
    let h = Harness::paused(&cluster, |config: &mut Config| {
        parallel(1)(config);
        // One paced start every 100 s, no burst.
        config.startup_rate_per_sec = 0.01;
        config.startup_burst = 1;
    })
    .await;
    for i in 0..3 {
        cluster.create_maintenance(&format!("nm-{i}"), &format!("n{i}"), at(i64::from(i)));
    }
    for (name, next) in [("nm-0", "nm-1"), ("nm-1", "nm-2")] {
        assert!(h.wait_succeeded(name, Duration::from_secs(30)).await);
        assert!(eventually(Duration::from_secs(5), || queued(&cluster, next)).await);
        cluster.delete_maintenance(name);
        assert!(h.wait_gone(name, Duration::from_secs(10)).await);
        assert!(
            eventually(Duration::from_secs(1), || cluster
                .maintenance(next)
                .is_some_and(|nm| nm.has_finalizer()))
            .await,
            "{next} starts within a second of {name}'s slot freeing"
        );
    }
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_oldest_starts_first_whatever_the_names_or_the_order_seen() {
    let cluster = nodes(4);
    let h = Harness::paused(&cluster, parallel(1)).await;
    // Created (by creation time) c, then b, then a; d and e share a time: by name.
    cluster.create_maintenance("c", "n0", at(0));
    cluster.create_maintenance("a", "n1", at(20));
    cluster.create_maintenance("e", "n3", at(10));
    cluster.create_maintenance("d", "n2", at(10));
    let mut started = Vec::new();
    for _ in 0..4 {
        let next = async {
            loop {
                let running: Vec<String> = ["a", "c", "d", "e"]
                    .into_iter()
                    .filter(|n| !started.contains(&n.to_string()))
                    .filter(|n| cluster.maintenance(n).is_some_and(|nm| nm.has_finalizer()))
                    .map(str::to_string)
                    .collect();
                if let Some(name) = running.first() {
                    return name.clone();
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        let name = tokio::time::timeout(Duration::from_secs(30), next)
            .await
            .unwrap();
        assert!(h.wait_succeeded(&name, Duration::from_secs(30)).await);
        started.push(name.clone());
        cluster.delete_maintenance(&name);
        assert!(h.wait_gone(&name, Duration::from_secs(10)).await);
    }
    assert_eq!(started, ["c", "d", "e", "a"]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn deleting_a_waiting_maintenance_undoes_nothing() {
    let cluster = nodes(3);
    let h = Harness::paused(&cluster, parallel(1)).await;
    cluster.create_maintenance("nm-0", "n0", at(0));
    cluster.create_maintenance("nm-1", "n1", at(1));
    cluster.create_maintenance("nm-2", "n2", at(2));
    assert!(eventually(Duration::from_secs(5), || queued(&cluster, "nm-2")).await);
    assert_eq!(cluster.status("nm-2").queue.unwrap().position, 2);
    cluster.delete_maintenance("nm-1");
    assert!(
        cluster.maintenance("nm-1").is_none(),
        "no finalizer: gone at once"
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(calls_about(&cluster, "nm-1", "n1"), ["write_status nm-1"]);
    assert_eq!(cluster.count_calls("emit_event UncordonNode"), 0);
    assert_eq!(h.queue().await, ["nm-2"]);
    // Its place moved up (written once the last write is old enough).
    assert_eq!(cluster.status("nm-2").queue.unwrap().position, 1);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_duplicate_of_a_waiting_maintenance_is_failed_and_never_starts() {
    let cluster = nodes(2);
    let h = Harness::paused(&cluster, parallel(1)).await;
    cluster.create_maintenance("nm-0", "n0", at(0));
    cluster.create_maintenance("first", "n1", at(1));
    cluster.create_maintenance("second", "n1", at(2));
    assert!(h.wait_failed("second", Duration::from_secs(10)).await);
    assert!(
        cluster
            .status("second")
            .last_error
            .unwrap()
            .contains("first")
    );
    assert_eq!(h.queue().await, ["first"]);
    cluster.delete_maintenance("nm-0");
    assert!(h.wait_succeeded("first", Duration::from_secs(30)).await);
    assert_eq!(h.active().await, ["first"]);
    assert_eq!(phase(&cluster, "second"), Some(Phase::Failed));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn places_further_back_are_rewritten_less_often() {
    let cluster = nodes(26);
    let h = Harness::paused(&cluster, parallel(1)).await;
    for i in 0..26 {
        cluster.create_maintenance(&format!("nm-{i:02}"), &format!("n{i}"), at(i64::from(i)));
    }
    assert!(eventually(Duration::from_secs(5), || queued(&cluster, "nm-25")).await);
    let writes = |name: &str| cluster.count_calls(&format!("write_status {name}"));
    let position = |name: &str| cluster.status(name).queue.map(|q| q.position);
    assert_eq!(position("nm-05"), Some(5));
    assert_eq!(position("nm-15"), Some(15));
    assert!(h.wait_succeeded("nm-00", Duration::from_secs(30)).await);
    cluster.delete_maintenance("nm-00");
    assert!(h.wait_gone("nm-00", Duration::from_secs(10)).await);
    // Everyone moved up one place; the first ten are rewritten within the interval (30 s),
    // places 11 to 20 within twice that.
    tokio::time::sleep(Duration::from_secs(35)).await;
    assert_eq!(position("nm-05"), Some(4));
    assert_eq!(writes("nm-05"), 2);
    assert_eq!(position("nm-15"), Some(15), "not yet");
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(position("nm-15"), Some(14));
    assert_eq!(writes("nm-15"), 2);
    h.stop().await;
}

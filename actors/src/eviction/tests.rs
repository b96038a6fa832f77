//! The eviction actor on its own, against the fake cluster.

use ractor::Actor;
use tokio::sync::mpsc;

use super::*;
use crate::fake::{FakeCluster, paused_config};
use crate::model::PodRef;
use crate::ports::EvictionOutcome;
use concurrency::INITIAL_WINDOW;

/// Hands every report it gets to a channel.
struct Collector;

impl Actor for Collector {
    type Msg = EvictionReport;
    type State = mpsc::UnboundedSender<EvictionReport>;
    type Arguments = mpsc::UnboundedSender<EvictionReport>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        reports: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(reports)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        report: EvictionReport,
        reports: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let _ = reports.send(report);
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_made_again_while_its_cancelled_call_is_out_is_answered() {
    let cluster = FakeCluster::with_node("n1", 1);
    let (evictor, collector, mut received) = evictor_on(&cluster, in_flight(1)).await;
    let request = || request_for(&collector, 0);
    // E.g. a node actor restarted while its eviction call was out: the old actor's
    // requests are cancelled, the new one asks again before the call returns.
    evictor.cast(EvictionMsg::Evict(request())).unwrap();
    evictor
        .cast(EvictionMsg::Cancel {
            maintenance: "nm1".into(),
        })
        .unwrap();
    evictor.cast(EvictionMsg::Evict(request())).unwrap();
    let report = tokio::time::timeout(Duration::from_secs(60), received.recv())
        .await
        .expect("the request made again is answered")
        .unwrap();
    assert_eq!(report.reply, EvictionReply::Done);
    assert_eq!(cluster.count_calls("evict_pod app/n1-p0"), 2);
    stop_both(&evictor, &collector);
}

#[tokio::test(start_paused = true)]
async fn cancelled_requests_leave_no_pdb_or_pod_behind() {
    let cluster = FakeCluster::with_node("n1", 3);
    cluster.add_pdb("app", "web", &["n1-p0", "n1-p1"], 0);
    cluster.add_pdb("app", "db", &["n1-p2"], 0);
    let (evictor, collector, mut received) = evictor_on(&cluster, paused_config()).await;
    evict_all(&evictor, &collector, 3);
    for _ in 0..3 {
        let report = received.recv().await.unwrap();
        assert!(matches!(report.reply, EvictionReply::Blocked { .. }));
    }
    let stats = ractor::call!(evictor, EvictionMsg::Stats).unwrap();
    assert_eq!((stats.held, stats.gates, stats.gated_pods), (3, 2, 3));
    // The maintenance is deleted: nothing of its requests may stay (a long run would
    // otherwise remember every pod and PDB that ever refused an eviction).
    evictor
        .cast(EvictionMsg::Cancel {
            maintenance: "nm1".into(),
        })
        .unwrap();
    let stats = ractor::call!(evictor, EvictionMsg::Stats).unwrap();
    assert_eq!((stats.held, stats.gates, stats.gated_pods), (0, 0, 0));
    stop_both(&evictor, &collector);
}

#[test]
fn a_pump_already_due_in_time_is_kept_and_waits_are_at_least_the_granularity() {
    let now = Instant::now();
    let ms = Duration::from_millis;
    assert_eq!(next_pump(now, ms(1), None), Some(now + PUMP_GRANULARITY));
    assert_eq!(next_pump(now, ms(40), None), Some(now + ms(40)));
    assert_eq!(next_pump(now, ms(40), Some(now + ms(10))), None, "kept");
    assert_eq!(next_pump(now, ms(40), Some(now + ms(40))), None, "kept");
    assert_eq!(
        next_pump(now, ms(20), Some(now + ms(40))),
        Some(now + ms(20)),
        "a sooner pump replaces a later one"
    );
}

#[test]
fn a_rate_limited_pump_waits_for_a_batch_or_for_what_the_queue_needs() {
    let start = Instant::now();
    let ms = Duration::from_millis;
    let mut fast = TokenBucket::new(1000.0, 100, start);
    assert_eq!(batch_wait(&fast, 50), None, "a full bucket sends at once");
    for _ in 0..100 {
        fast.take();
    }
    assert_eq!(batch_wait(&fast, 0), None, "nothing to send");
    let granule = fast.earned_in(PUMP_GRANULARITY);
    assert_eq!(granule, 20.0);
    assert_eq!(
        batch_wait(&fast, 500),
        Some(ms(20)),
        "one token per answer no more: a granule's worth"
    );
    assert_eq!(
        batch_wait(&fast, 3),
        Some(ms(3)),
        "only what the queue needs"
    );
    fast.refill(start + ms(20));
    assert_eq!(batch_wait(&fast, 500), None);

    // nmo's default rate earns one token per granule: one at a time, as before.
    let mut slow = TokenBucket::new(50.0, 100, start);
    for _ in 0..100 {
        slow.take();
    }
    assert_eq!(batch_wait(&slow, 500), Some(ms(20)));
}

/// [`paused_config`] with at most `n` eviction calls in flight.
fn in_flight(n: usize) -> Config {
    Config {
        eviction_max_in_flight: n,
        ..paused_config()
    }
}

/// The eviction actor on `cluster` with `config`, and a collector of its reports.
async fn evictor_on(
    cluster: &FakeCluster,
    config: Config,
) -> (
    ActorRef<EvictionMsg>,
    ActorRef<EvictionReport>,
    mpsc::UnboundedReceiver<EvictionReport>,
) {
    let (evictor, _) = Actor::spawn(
        None,
        EvictionActor,
        EvictionArgs {
            cluster: Arc::new(cluster.clone()),
            config: Arc::new(config),
        },
    )
    .await
    .unwrap();
    let (reports, received) = mpsc::unbounded_channel();
    let (collector, _) = Actor::spawn(None, Collector, reports).await.unwrap();
    (evictor, collector, received)
}

/// Stops the eviction actor and its collector.
fn stop_both(evictor: &ActorRef<EvictionMsg>, collector: &ActorRef<EvictionReport>) {
    evictor.stop(None);
    collector.stop(None);
}

/// A request to evict pod `n1-p{i}` of namespace `app` for maintenance `nm1`.
fn request_for(collector: &ActorRef<EvictionReport>, i: usize) -> EvictionRequest {
    EvictionRequest {
        pod: PodRef {
            namespace: "app".into(),
            name: format!("n1-p{i}").into(),
        },
        uid: format!("uid-app-n1-p{i}").into(),
        grace_period_seconds: None,
        maintenance: "nm1".into(),
        reply_to: collector.get_derived(),
        span: tracing::Span::none(),
        labels: crate::model::Labels::default(),
        healthy: true,
        unstarted: false,
        controller: None,
    }
}

/// Asks `evictor` to evict `app/n1-p0` to `app/n1-p<pods - 1>` (see [`request_for`]).
fn evict_all(evictor: &ActorRef<EvictionMsg>, collector: &ActorRef<EvictionReport>, pods: usize) {
    for i in 0..pods {
        evictor
            .cast(EvictionMsg::Evict(request_for(collector, i)))
            .unwrap();
    }
}

/// Scripts `outcome` as the answer to the first eviction of each of `app/n1-p0` to
/// `app/n1-p<pods - 1>`.
fn first_answers(cluster: &FakeCluster, pods: usize, outcome: EvictionOutcome) {
    for i in 0..pods {
        cluster.script_evictions("app", &format!("n1-p{i}"), vec![outcome.clone()]);
    }
}

/// Waits (paused time, 1 ms steps) until the fake cluster has seen more than `calls` eviction
/// calls, and returns how many it has seen then.
async fn calls_beyond(cluster: &FakeCluster, calls: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = cluster.count_calls("evict_pod");
        if now > calls {
            return now;
        }
        assert!(Instant::now() < deadline, "no eviction call past {calls}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn throttling_halves_the_calls_in_flight_which_grow_back_one_per_window() {
    const PODS: usize = 60;
    let cluster = FakeCluster::with_node("n1", PODS);
    // Every call takes 100 ms, so that the calls out at once can be counted.
    cluster.delay_next("evict_pod", 10_000, Duration::from_millis(100));
    // The first calls (the initial window's 4, all out at once) are throttled: one pause, one
    // cut.
    first_answers(
        &cluster,
        INITIAL_WINDOW,
        EvictionOutcome::Throttled {
            retry_after: Some(Duration::from_secs(1)),
        },
    );
    let config = Config {
        eviction_max_in_flight: 8,
        eviction_rate_per_sec: 10_000.0,
        eviction_burst: 10_000,
        ..paused_config()
    };
    let (evictor, collector, mut received) = evictor_on(&cluster, config).await;
    evict_all(&evictor, &collector, PODS);
    assert_eq!(calls_beyond(&cluster, 0).await, INITIAL_WINDOW);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stats = ractor::call!(evictor, EvictionMsg::Stats).unwrap();
    assert_eq!(
        (stats.throttled, stats.in_flight_limit),
        (4, 1),
        "{stats:?}"
    );
    assert_eq!(cluster.count_calls("evict_pod"), INITIAL_WINDOW, "paused");

    // After the pause: one call, then two (up to the new ceiling, half the 4 refused), then one
    // more for each window of successes, but at least 16 of them: 8 rounds of 2, 6 of 3...
    let mut sent = INITIAL_WINDOW;
    let mut bursts = Vec::new();
    while sent < PODS + INITIAL_WINDOW {
        let now = calls_beyond(&cluster, sent).await;
        bursts.push(now - sent);
        sent = now;
        let stats = ractor::call!(evictor, EvictionMsg::Stats).unwrap();
        assert!(stats.in_flight_limit <= 8, "{stats:?}");
    }
    assert_eq!(
        bursts,
        [
            1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 5, 4
        ],
        "{bursts:?}"
    );
    for _ in 0..PODS {
        let report = received.recv().await.unwrap();
        assert_eq!(report.reply, EvictionReply::Done);
    }
    let stats = ractor::call!(evictor, EvictionMsg::Stats).unwrap();
    assert_eq!(stats.in_flight_limit, 5, "{stats:?}");
    stop_both(&evictor, &collector);
}

#[tokio::test(start_paused = true)]
async fn the_first_calls_reach_the_configured_cap_after_the_first_answers() {
    let cluster = FakeCluster::with_node("n1", 20);
    cluster.delay_next("evict_pod", 10_000, Duration::from_millis(100));
    let (evictor, collector, mut received) = evictor_on(&cluster, in_flight(8)).await;
    evict_all(&evictor, &collector, 20);
    let mut sent = 0;
    let mut bursts = Vec::new();
    while sent < 20 {
        let now = calls_beyond(&cluster, sent).await;
        bursts.push(now - sent);
        sent = now;
    }
    assert_eq!(bursts, [INITIAL_WINDOW, 8, 8], "{bursts:?}");
    for _ in 0..20 {
        assert_eq!(received.recv().await.unwrap().reply, EvictionReply::Done);
    }
    stop_both(&evictor, &collector);
}

#[tokio::test(start_paused = true)]
async fn the_first_success_after_a_throttle_does_not_shorten_the_next_pause() {
    let cluster = FakeCluster::with_node("n1", 2);
    first_answers(
        &cluster,
        2,
        EvictionOutcome::Throttled { retry_after: None },
    );
    let config = Config {
        eviction_max_in_flight: 4,
        backoff_base: Duration::from_secs(1),
        backoff_max: Duration::from_secs(60),
        ..paused_config()
    };
    let (evictor, collector, mut received) = evictor_on(&cluster, config).await;
    // Throttled (a pause of 0.5 to 1 s, the cap down to 2), then through after the pause: one
    // success of a window of 2.
    evictor
        .cast(EvictionMsg::Evict(request_for(&collector, 0)))
        .unwrap();
    assert_eq!(received.recv().await.unwrap().reply, EvictionReply::Done);
    assert_eq!(cluster.count_calls("evict_pod"), 2);
    // Throttled again: the pause is the second step's (1 to 2 s), not the first's again.
    evictor
        .cast(EvictionMsg::Evict(request_for(&collector, 1)))
        .unwrap();
    let throttled_at = Instant::now();
    assert_eq!(calls_beyond(&cluster, 2).await, 3);
    assert_eq!(calls_beyond(&cluster, 3).await, 4);
    let paused = throttled_at.elapsed();
    assert!(paused > Duration::from_secs(1), "paused {paused:?}");
    assert_eq!(received.recv().await.unwrap().reply, EvictionReply::Done);
    stop_both(&evictor, &collector);
}

#[tokio::test(start_paused = true)]
async fn budget_refusals_leave_the_calls_in_flight_alone() {
    let cluster = FakeCluster::with_node("n1", 8);
    first_answers(
        &cluster,
        8,
        EvictionOutcome::BlockedByPdb {
            pdb: Some("web".into()),
            message: "Cannot evict pod as it would violate the pod's disruption budget.".into(),
            retry_after: Some(Duration::from_secs(1)),
        },
    );
    let (evictor, collector, mut received) = evictor_on(&cluster, in_flight(8)).await;
    evict_all(&evictor, &collector, 8);
    // Only successes move the window (from the initial 4 up to 8), refusals never.
    let mut done = 0;
    let mut limit = INITIAL_WINDOW;
    while done < 8 {
        let report = received.recv().await.unwrap();
        let stats = ractor::call!(evictor, EvictionMsg::Stats).unwrap();
        assert!(stats.in_flight_limit >= limit, "{stats:?}");
        limit = stats.in_flight_limit;
        if report.reply == EvictionReply::Done {
            done += 1;
        } else {
            assert!(
                matches!(report.reply, EvictionReply::Blocked { .. }),
                "{report:?}"
            );
        }
    }
    let stats = ractor::call!(evictor, EvictionMsg::Stats).unwrap();
    assert_eq!((stats.blocked, stats.throttled), (8, 0), "{stats:?}");
    assert_eq!(stats.in_flight_limit, 8);
    stop_both(&evictor, &collector);
}

#[tokio::test(start_paused = true)]
async fn an_ended_watch_is_subscribed_again_a_second_later_and_no_sooner() {
    let cluster = FakeCluster::with_node("n1", 1);
    let (evictor, _collector, _received) = evictor_on(&cluster, paused_config()).await;
    let opened = |cluster: &FakeCluster| {
        (
            cluster.count_calls("watch_budgets"),
            cluster.count_calls("watch_eviction_webhooks"),
        )
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(opened(&cluster), (1, 1));
    cluster.end_eviction_watches();
    tokio::time::sleep(Duration::from_millis(990)).await;
    assert_eq!(opened(&cluster), (1, 1), "not before the retry's wait");
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(opened(&cluster), (2, 2), "both again, once each");
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(opened(&cluster), (2, 2), "and only once");
    evictor.stop(None);
}

//! The eviction actor on its own, against the fake cluster.

use ractor::Actor;
use tokio::sync::mpsc;

use super::*;
use crate::fake::{FakeCluster, paused_config};

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
    let config = Config {
        eviction_max_in_flight: 1,
        ..paused_config()
    };
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
    let (reports, mut received) = mpsc::unbounded_channel();
    let (collector, _) = Actor::spawn(None, Collector, reports).await.unwrap();
    let request = || EvictionRequest {
        pod: PodRef {
            namespace: "app".into(),
            name: "n1-p0".into(),
        },
        uid: "uid-app-n1-p0".into(),
        grace_period_seconds: None,
        maintenance: "nm1".into(),
        reply_to: collector.get_derived(),
        span: tracing::Span::none(),
        labels: crate::model::Labels::default(),
        healthy: true,
        unstarted: false,
        controller: None,
    };
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
    evictor.stop(None);
    collector.stop(None);
}

#[tokio::test(start_paused = true)]
async fn cancelled_requests_leave_no_pdb_or_pod_behind() {
    let cluster = FakeCluster::with_node("n1", 3);
    cluster.add_pdb("app", "web", &["n1-p0", "n1-p1"], 0);
    cluster.add_pdb("app", "db", &["n1-p2"], 0);
    let (evictor, _) = Actor::spawn(
        None,
        EvictionActor,
        EvictionArgs {
            cluster: Arc::new(cluster.clone()),
            config: Arc::new(paused_config()),
        },
    )
    .await
    .unwrap();
    let (reports, mut received) = mpsc::unbounded_channel();
    let (collector, _) = Actor::spawn(None, Collector, reports).await.unwrap();
    for i in 0..3 {
        let request = EvictionRequest {
            pod: PodRef {
                namespace: "app".into(),
                name: format!("n1-p{i}"),
            },
            uid: format!("uid-app-n1-p{i}"),
            grace_period_seconds: None,
            maintenance: "nm1".into(),
            reply_to: collector.get_derived(),
            span: tracing::Span::none(),
            labels: crate::model::Labels::default(),
            healthy: true,
            unstarted: false,
            controller: None,
        };
        evictor.cast(EvictionMsg::Evict(request)).unwrap();
    }
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
    evictor.stop(None);
    collector.stop(None);
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

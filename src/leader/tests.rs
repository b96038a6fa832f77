//! The election against an in-memory lease endpoint (a tower service behind a real kube
//! client), on paused time: clock skew, absurd lease records and hung calls are all scripted.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::client::Body;
use tokio::time::Instant;

use super::*;

/// The one lease the fake API server stores, and how it behaves.
#[derive(Default)]
struct FakeLeases {
    lease: Option<Lease>,
    version: u64,
    /// Every call hangs (a half-open connection).
    hang: bool,
    /// GETs and PUTs answered.
    gets: u64,
    puts: u64,
}

type Shared = Arc<Mutex<FakeLeases>>;

fn status(code: StatusCode, reason: &str) -> Response<Body> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "reason": reason, "code": code.as_u16(), "message": reason,
    });
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string().into_bytes()))
        .expect("a response")
}

fn ok(lease: &Lease) -> Response<Body> {
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(Body::from(
            serde_json::to_vec(lease).expect("a lease serialises"),
        ))
        .expect("a response")
}

async fn answer(state: Shared, request: Request<Body>) -> Response<Body> {
    if state.lock().expect("state").hang {
        std::future::pending::<()>().await;
    }
    let method = request.method().clone();
    let body = request
        .into_body()
        .collect_bytes()
        .await
        .unwrap_or_default();
    let mut state = state.lock().expect("state");
    match method {
        Method::GET => state.gets += 1,
        Method::PUT => state.puts += 1,
        _ => {}
    }
    match method {
        Method::GET => match &state.lease {
            Some(lease) => ok(lease),
            None => status(StatusCode::NOT_FOUND, "NotFound"),
        },
        Method::POST | Method::PUT => {
            let mut lease: Lease = serde_json::from_slice(&body).expect("a lease body");
            let stored_version = state
                .lease
                .as_ref()
                .and_then(|l| l.metadata.resource_version.clone());
            if method == Method::POST && state.lease.is_some() {
                return status(StatusCode::CONFLICT, "AlreadyExists");
            }
            if method == Method::PUT && lease.metadata.resource_version != stored_version {
                return status(StatusCode::CONFLICT, "Conflict");
            }
            state.version += 1;
            lease.metadata.resource_version = Some(state.version.to_string());
            state.lease = Some(lease.clone());
            ok(&lease)
        }
        _ => status(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed"),
    }
}

fn fake_api(state: &Shared) -> Client {
    let state = state.clone();
    let service = tower::service_fn(move |request: Request<Body>| {
        let state = state.clone();
        async move { Ok::<_, std::convert::Infallible>(answer(state, request).await) }
    });
    Client::new(service, "nmo")
}

fn config(identity: &str) -> LeaderConfig {
    LeaderConfig::new("nmo".into(), identity.into())
}

fn elector(state: &Shared, identity: &str) -> LeaderElector {
    LeaderElector::new(fake_api(state), config(identity))
}

/// Someone else's lease with this record.
fn foreign(renewed: Timestamp, duration: i32, transitions: i32) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(LEADER_ELECTION_ID.into()),
            namespace: Some("nmo".into()),
            resource_version: Some("1".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("other".into()),
            lease_duration_seconds: Some(duration),
            renew_time: Some(MicroTime(renewed)),
            acquire_time: Some(MicroTime(renewed)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }),
    }
}

fn holder(state: &Shared) -> Option<String> {
    state
        .lock()
        .expect("state")
        .lease
        .as_ref()
        .and_then(|l| l.spec.as_ref())
        .and_then(|s| s.holder_identity.clone())
}

#[tokio::test(start_paused = true)]
async fn the_first_replica_creates_the_lease_and_leads() {
    let state = Shared::default();
    let me = elector(&state, "me");
    me.acquire().await.expect("leads");
    assert_eq!(holder(&state).as_deref(), Some("me"));
    let spec = state
        .lock()
        .expect("state")
        .lease
        .clone()
        .and_then(|l| l.spec);
    assert_eq!(spec.and_then(|s| s.lease_transitions), Some(0));
    assert!(me.fence().allows_writes());
}

#[tokio::test(start_paused = true)]
async fn a_standby_whose_clock_is_ahead_does_not_steal_a_lease_being_renewed() {
    // The leader's clock is a day behind this replica's: every renewTime it writes looks long
    // expired here. What counts is that the record keeps changing.
    let state = Shared::default();
    state.lock().expect("state").lease = Some(foreign(
        Timestamp::now() - SignedDuration::from_hours(24),
        15,
        0,
    ));
    let renewer = {
        let state = state.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                let mut state = state.lock().expect("state");
                state.version += 1;
                let version = state.version.to_string();
                if let Some(lease) = state.lease.as_mut() {
                    lease.metadata.resource_version = Some(version);
                    if let Some(spec) = lease.spec.as_mut() {
                        spec.renew_time =
                            Some(MicroTime(Timestamp::now() - SignedDuration::from_hours(24)));
                    }
                }
            }
        })
    };
    let standby = elector(&state, "me");
    let stolen = tokio::time::timeout(Duration::from_secs(120), standby.acquire()).await;
    assert!(
        stolen.is_err(),
        "the standby took a lease that was being renewed"
    );
    assert_eq!(holder(&state).as_deref(), Some("other"));

    // The leader dies: the record stands still, and after its 15 s the standby takes over.
    renewer.abort();
    let died = Instant::now();
    standby.acquire().await.expect("takes over");
    let waited = died.elapsed();
    assert!(
        // It saw the last change at most one 2 s poll after it happened (at most 2 s before
        // `died`), and notices the expiry at most one poll late.
        waited >= Duration::from_secs(13) && waited <= Duration::from_secs(19),
        "took over after {waited:?}"
    );
    assert_eq!(holder(&state).as_deref(), Some("me"));
}

#[tokio::test(start_paused = true)]
async fn an_absurd_lease_record_neither_crashes_nor_blocks_the_election() {
    // renewTime at the end of time and transitions at i32::MAX: arithmetic on either overflows.
    let state = Shared::default();
    state.lock().expect("state").lease = Some(foreign(Timestamp::MAX, 1, i32::MAX));
    let standby = elector(&state, "me");
    tokio::time::timeout(Duration::from_secs(30), standby.acquire())
        .await
        .expect("takes the stale lease over")
        .expect("leads");
    let spec = state
        .lock()
        .expect("state")
        .lease
        .clone()
        .and_then(|l| l.spec)
        .expect("a spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("me"));
    assert_eq!(spec.lease_transitions, Some(i32::MAX), "saturates");

    // A lease claiming to be valid for i32::MAX seconds is honoured, without overflow.
    let state = Shared::default();
    state.lock().expect("state").lease = Some(foreign(Timestamp::MAX, i32::MAX, -5));
    let standby = elector(&state, "me");
    let stolen = tokio::time::timeout(Duration::from_secs(60), standby.acquire()).await;
    assert!(stolen.is_err());
    assert_eq!(holder(&state).as_deref(), Some("other"));
}

#[tokio::test(start_paused = true)]
async fn a_hung_renewal_ends_leadership_by_the_renew_deadline() {
    let state = Shared::default();
    let leader = elector(&state, "me");
    leader.acquire().await.expect("leads");
    let fence = leader.fence();
    // A few good renewals keep the fence open.
    let renewing = tokio::time::timeout(Duration::from_secs(30), leader.hold()).await;
    assert!(
        renewing.is_err(),
        "still leading after 30 s of good renewals"
    );
    assert!(fence.allows_writes());

    let last_sent = fence.deadline().expect("open") - leader.config.renew_deadline;
    state.lock().expect("state").hang = true;
    let error = tokio::time::timeout(Duration::from_secs(60), leader.hold())
        .await
        .expect("gives up instead of waiting on the hung call");
    assert!(matches!(error, LeaderError::Lost(_)), "{error}");
    let stopped = Instant::now() - last_sent;
    assert!(
        stopped <= leader.config.renew_deadline + Duration::from_millis(1),
        "stopped leading {stopped:?} after the last good renewal was sent"
    );
    assert!(!fence.allows_writes());
    // The lease would only expire for a standby lease_duration after that renewal.
    assert!(stopped < leader.config.lease_duration);
}

#[tokio::test(start_paused = true)]
async fn the_leader_renews_with_one_write_and_no_read() {
    let state = Shared::default();
    let leader = elector(&state, "me");
    leader.acquire().await.expect("leads");
    let (gets, puts, version) = {
        let state = state.lock().expect("state");
        (state.gets, state.puts, state.version)
    };
    // Five renewals (one every retry period of 2 s), none of them losing leadership.
    let renewing = tokio::time::timeout(Duration::from_millis(10_500), leader.hold()).await;
    assert!(renewing.is_err(), "still leading");
    let state = state.lock().expect("state");
    assert_eq!(state.gets - gets, 0, "renewals read the lease");
    assert_eq!(state.puts - puts, 5);
    // Each write was accepted: five new versions of the lease, still this replica's.
    assert_eq!(state.version - version, 5);
    assert_eq!(
        state
            .lease
            .as_ref()
            .and_then(|l| l.spec.as_ref())
            .and_then(|s| s.holder_identity.as_deref()),
        Some("me")
    );
}

#[tokio::test(start_paused = true)]
async fn the_fence_closes_once_the_renew_deadline_passes_without_a_renewal() {
    let state = Shared::default();
    let leader = elector(&state, "me");
    leader.acquire().await.expect("leads");
    let fence = leader.fence();
    assert!(fence.allows_writes());
    // Nobody renews (hold() is not running, as when the renewing task is stuck).
    tokio::time::sleep(leader.config.renew_deadline).await;
    assert!(!fence.allows_writes());
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_lease_was_taken_stops_at_once() {
    let state = Shared::default();
    let leader = elector(&state, "me");
    leader.acquire().await.expect("leads");
    {
        let mut state = state.lock().expect("state");
        state.version += 1;
        let mut lease = foreign(Timestamp::now(), 15, 1);
        lease.metadata.resource_version = Some(state.version.to_string());
        state.lease = Some(lease);
    }
    let error = tokio::time::timeout(Duration::from_secs(10), leader.hold())
        .await
        .expect("notices the new holder");
    assert!(
        matches!(error, LeaderError::Taken(ref who) if who == "other"),
        "{error}"
    );
    assert!(!leader.fence().allows_writes());
}

#[tokio::test(start_paused = true)]
async fn release_closes_the_fence_and_hands_the_lease_back() {
    let state = Shared::default();
    let leader = elector(&state, "me");
    leader.acquire().await.expect("leads");
    leader.release().await.expect("released");
    assert!(!leader.fence().allows_writes());
    assert_eq!(holder(&state), None);
    // A standby takes over at once (the released record has a 1 s duration and no holder).
    let standby = elector(&state, "standby");
    tokio::time::timeout(Duration::from_secs(5), standby.acquire())
        .await
        .expect("at once")
        .expect("leads");
    assert_eq!(holder(&state).as_deref(), Some("standby"));
}

#[test]
fn timings_that_allow_two_leaders_are_refused() {
    let valid = config("me");
    assert_eq!(valid.validate(), Ok(()));
    let same = LeaderConfig {
        renew_deadline: valid.lease_duration,
        ..valid.clone()
    };
    assert!(matches!(
        same.validate(),
        Err(LeaderConfigError::DeadlineNotBeforeExpiry { .. })
    ));
    let zero = LeaderConfig {
        retry_period: Duration::ZERO,
        ..valid.clone()
    };
    assert_eq!(
        zero.validate(),
        Err(LeaderConfigError::Zero("retry-period"))
    );
    let slow_retry = LeaderConfig {
        retry_period: valid.renew_deadline,
        ..valid.clone()
    };
    assert!(matches!(
        slow_retry.validate(),
        Err(LeaderConfigError::RetryNotBeforeDeadline { .. })
    ));
    let huge = LeaderConfig {
        lease_duration: Duration::from_secs(u64::from(u32::MAX)),
        ..valid
    };
    assert!(matches!(
        huge.validate(),
        Err(LeaderConfigError::TooLong(_))
    ));
}

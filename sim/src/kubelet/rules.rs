//! What a kubelet decides about a pod, whatever API server it serves: pure functions shared by
//! the simulator's in-process kubelet ([`super::run`], reading the store) and the kube-client
//! kubelet ([`super::remote`], reading a watch of any API server), so that both behave alike
//! and the behaviour is written once.
//!
//! The rules: a pod bound to a node is started (Running and Ready, see [`running_status`])
//! after the start-up delay; a pod being deleted is finished, deleted with grace period 0 and
//! its uid as precondition ([`FINISH_GRACE_SECONDS`]), once its grace period has elapsed since
//! the kubelet saw the deletion; a shorter grace period asked later replaces a longer one; a
//! pod someone else started is left alone. Every delay is scaled by [`Timing::scale`].

use std::time::Duration;

use rand::Rng;
use serde_json::{Value, json};

/// Speed of the simulated kubelet.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Multiplies every simulated delay (1.0: real time, 0: instant).
    pub time_scale: f64,
    /// Time from scheduling to Running/Ready (before scaling).
    pub pod_startup: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            time_scale: 1.0,
            pod_startup: Duration::from_secs(2),
        }
    }
}

impl Timing {
    /// `d` at this speed (0: instant).
    pub fn scale(&self, d: Duration) -> Duration {
        if self.time_scale <= 0.0 || !self.time_scale.is_finite() {
            Duration::ZERO
        } else {
            d.mul_f64(self.time_scale)
        }
    }
}

/// The grace period a kubelet deletes a pod with once it has stopped: the pod goes at once.
pub const FINISH_GRACE_SECONDS: i64 = 0;

/// What a kubelet needs to know about a pod.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodFacts {
    /// `metadata.uid`.
    pub uid: String,
    /// `spec.nodeName` ("" while unscheduled).
    pub node: String,
    /// `status.phase` ("" when unset).
    pub phase: String,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `metadata.deletionGracePeriodSeconds` (0 when unset).
    pub grace_seconds: i64,
}

impl PodFacts {
    /// The facts of a pod as the API returns it.
    pub fn of(pod: &Value) -> PodFacts {
        let text = |pointer: &str| {
            pod.pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        PodFacts {
            uid: text("/metadata/uid"),
            node: text("/spec/nodeName"),
            phase: text("/status/phase"),
            deleting: pod
                .pointer("/metadata/deletionTimestamp")
                .is_some_and(|d| !d.is_null()),
            grace_seconds: pod
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(0),
        }
    }

    /// Whether the pod is bound to a node.
    pub fn bound(&self) -> bool {
        !self.node.is_empty()
    }

    fn pending(&self) -> bool {
        // The API server sets `Pending` on create; a pod without a phase is one too.
        self.phase.is_empty() || self.phase == "Pending"
    }
}

/// What the kubelet already has under way for a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Underway {
    /// A start is scheduled (or running).
    pub starting: bool,
    /// A finish is scheduled, for this grace period.
    pub finishing_after_grace: Option<i64>,
}

/// What to do about a pod.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision {
    /// Nothing.
    Nothing,
    /// The pod is gone: cancel whatever is under way for it.
    CancelAll,
    /// Start it (Running, Ready) after this delay, if [`may_start`] still holds then.
    Start {
        /// The scaled start-up delay.
        after: Duration,
    },
    /// Finish it (delete with [`FINISH_GRACE_SECONDS`] and its uid as precondition) after this
    /// delay, replacing any finish scheduled before.
    Finish {
        /// The grace period it honours, seconds.
        grace_seconds: i64,
        /// The scaled grace period.
        after: Duration,
    },
    /// Someone else started it: forget the start timer (without aborting a start that may be
    /// writing already).
    ForgetStart,
}

/// What to do about `pod` (None: it is gone) given what is `underway` for it.
pub fn decide(pod: Option<&PodFacts>, underway: Underway, timing: &Timing) -> Decision {
    let Some(pod) = pod else {
        return Decision::CancelAll;
    };
    if !pod.bound() {
        return Decision::Nothing;
    }
    if pod.deleting {
        // A repeated delete may shorten the grace period, never lengthen it.
        if underway
            .finishing_after_grace
            .is_some_and(|scheduled| scheduled <= pod.grace_seconds)
        {
            return Decision::Nothing;
        }
        // A pod that has finished has no container left to stop: a kubelet removes it at
        // once, whatever its grace period.
        let finished = pod.phase == "Succeeded" || pod.phase == "Failed";
        let grace = if finished {
            0
        } else {
            u64::try_from(pod.grace_seconds).unwrap_or(0)
        };
        return Decision::Finish {
            grace_seconds: pod.grace_seconds,
            after: timing.scale(Duration::from_secs(grace)),
        };
    }
    match (pod.pending(), underway.starting) {
        (true, false) => Decision::Start {
            after: timing.scale(timing.pod_startup),
        },
        (false, true) => Decision::ForgetStart,
        _ => Decision::Nothing,
    }
}

/// Whether the pod whose start was scheduled for `uid` may be started now: the same pod (not
/// one re-created with its name), still Pending, not being deleted, bound.
pub fn may_start(pod: &PodFacts, uid: &str) -> bool {
    pod.uid == uid && pod.pending() && !pod.deleting && pod.bound()
}

/// `n` random lowercase hex digits.
pub fn rand_hex(n: usize) -> String {
    const HEX: &[u8] = b"0123456789abcdef";
    let mut r = rand::rng();
    (0..n)
        .map(|_| HEX[r.random_range(0..16usize)] as char)
        .collect()
}

/// A random pod IP.
pub fn pod_ip() -> String {
    let mut r = rand::rng();
    format!(
        "10.{}.{}.{}",
        r.random_range(0..=255),
        r.random_range(0..=255),
        r.random_range(2..=254)
    )
}

/// The node's `InternalIP` (the address a pod's `hostIP` takes), "10.0.0.1" when it has none.
pub fn node_internal_ip(node: &Value) -> String {
    node.pointer("/status/addresses")
        .and_then(Value::as_array)
        .and_then(|addresses| {
            addresses
                .iter()
                .find(|a| a.get("type").and_then(Value::as_str) == Some("InternalIP"))
        })
        .and_then(|a| a.get("address").and_then(Value::as_str))
        .unwrap_or("10.0.0.1")
        .to_string()
}

/// The status a running, ready pod has (without `qosClass`, which the API server sets on
/// create and never changes; see [`running_status`]).
pub fn started_status(pod: &Value, host_ip: &str, ip: &str, now: &str) -> Value {
    let cond = |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": now});
    let statuses: Vec<Value> = pod
        .pointer("/spec/containers")
        .and_then(|c| c.as_array())
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    let image = c.get("image").and_then(|i| i.as_str()).unwrap_or_default();
                    let cid = rand_hex(64);
                    json!({
                        "name": c.get("name").cloned().unwrap_or(json!("")),
                        "state": {"running": {"startedAt": now}},
                        "lastState": {},
                        "ready": true,
                        "restartCount": 0,
                        "image": image,
                        "imageID": format!("{}@sha256:{}", image.split(':').next().unwrap_or(image), &cid),
                        "containerID": format!("containerd://{cid}"),
                        "started": true
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    json!({
        "phase": "Running",
        "conditions": [cond("PodReadyToStartContainers"), cond("Initialized"), cond("Ready"), cond("ContainersReady"), cond("PodScheduled")],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": now,
        "containerStatuses": statuses,
    })
}

/// The whole status of a running, ready pod, `qosClass` included (for a pod written to a
/// store directly).
pub fn running_status(pod: &Value, host_ip: &str, ip: &str, now: &str) -> Value {
    let mut status = started_status(pod, host_ip, ip, now);
    status["qosClass"] = json!(crate::rest::qos_class(pod));
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing() -> Timing {
        Timing {
            time_scale: 0.5,
            pod_startup: Duration::from_secs(2),
        }
    }

    fn bound(phase: &str) -> PodFacts {
        PodFacts {
            uid: "u1".into(),
            node: "n1".into(),
            phase: phase.into(),
            ..PodFacts::default()
        }
    }

    fn deleting(grace: i64) -> PodFacts {
        PodFacts {
            deleting: true,
            grace_seconds: grace,
            ..bound("Running")
        }
    }

    #[test]
    fn a_bound_pending_pod_is_started_after_the_scaled_start_up() {
        let decision = decide(Some(&bound("Pending")), Underway::default(), &timing());
        assert_eq!(
            decision,
            Decision::Start {
                after: Duration::from_secs(1)
            }
        );
        let no_phase = decide(Some(&bound("")), Underway::default(), &timing());
        assert!(matches!(no_phase, Decision::Start { .. }));
    }

    #[test]
    fn an_unbound_pod_or_a_start_under_way_is_left_alone() {
        let unbound = PodFacts {
            node: String::new(),
            ..bound("Pending")
        };
        assert_eq!(
            decide(Some(&unbound), Underway::default(), &timing()),
            Decision::Nothing
        );
        let starting = Underway {
            starting: true,
            ..Underway::default()
        };
        assert_eq!(
            decide(Some(&bound("Pending")), starting, &timing()),
            Decision::Nothing
        );
        assert_eq!(
            decide(Some(&bound("Running")), starting, &timing()),
            Decision::ForgetStart
        );
        assert_eq!(
            decide(Some(&bound("Running")), Underway::default(), &timing()),
            Decision::Nothing
        );
    }

    #[test]
    fn a_deleted_pod_that_already_finished_goes_at_once() {
        for phase in ["Succeeded", "Failed"] {
            let finished = PodFacts {
                phase: phase.into(),
                ..deleting(30)
            };
            assert_eq!(
                decide(Some(&finished), Underway::default(), &timing()),
                Decision::Finish {
                    grace_seconds: 30,
                    after: Duration::ZERO
                },
                "{phase}"
            );
        }
    }

    #[test]
    fn a_deleted_pod_finishes_after_its_grace_period_and_a_shorter_one_replaces_it() {
        let first = decide(Some(&deleting(30)), Underway::default(), &timing());
        assert_eq!(
            first,
            Decision::Finish {
                grace_seconds: 30,
                after: Duration::from_secs(15)
            }
        );
        let scheduled = Underway {
            finishing_after_grace: Some(30),
            ..Underway::default()
        };
        assert_eq!(
            decide(Some(&deleting(30)), scheduled, &timing()),
            Decision::Nothing
        );
        assert_eq!(
            decide(Some(&deleting(0)), scheduled, &timing()),
            Decision::Finish {
                grace_seconds: 0,
                after: Duration::ZERO
            }
        );
    }

    #[test]
    fn a_gone_pod_cancels_everything() {
        assert_eq!(
            decide(None, Underway::default(), &timing()),
            Decision::CancelAll
        );
    }

    #[test]
    fn only_the_same_pending_bound_live_pod_may_start() {
        assert!(may_start(&bound("Pending"), "u1"));
        assert!(!may_start(&bound("Pending"), "u2"), "re-created");
        assert!(!may_start(&bound("Running"), "u1"));
        assert!(!may_start(
            &PodFacts {
                deleting: true,
                ..bound("Pending")
            },
            "u1"
        ));
    }

    #[test]
    fn instant_and_scaled_timings() {
        let instant = Timing {
            time_scale: 0.0,
            ..Timing::default()
        };
        assert_eq!(instant.scale(Duration::from_secs(30)), Duration::ZERO);
        assert_eq!(
            Timing::default().scale(Duration::from_secs(30)),
            Duration::from_secs(30)
        );
    }

    #[test]
    fn facts_are_read_from_the_pod_as_served() {
        let pod = json!({
            "metadata": {"uid": "u9", "deletionTimestamp": "2026-01-01T00:00:00Z",
                         "deletionGracePeriodSeconds": 5},
            "spec": {"nodeName": "n3"},
            "status": {"phase": "Running"}
        });
        assert_eq!(
            PodFacts::of(&pod),
            PodFacts {
                uid: "u9".into(),
                node: "n3".into(),
                phase: "Running".into(),
                deleting: true,
                grace_seconds: 5
            }
        );
        let node = json!({"status": {"addresses": [{"type": "Hostname", "address": "h"},
                                                   {"type": "InternalIP", "address": "10.1.2.3"}]}});
        assert_eq!(node_internal_ip(&node), "10.1.2.3");
        let status = started_status(
            &json!({"spec": {"containers": [{"name": "c", "image": "i:1"}]}}),
            "10.1.2.3",
            "10.9.9.9",
            "now",
        );
        assert_eq!(status["phase"], "Running");
        assert!(status.get("qosClass").is_none());
        assert_eq!(status["containerStatuses"][0]["ready"], true);
    }
}

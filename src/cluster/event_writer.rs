//! nmo's Events (`events.k8s.io/v1`), written as client-go's event recorder writes them: an
//! event the same reporter says again about the same object (same type, reason and action,
//! within [`SERIES_TTL`]) is not a new object but a series: its `series.count` and
//! `series.lastObservedTime` are patched on the first one.
//!
//! It keeps, per event it may have to patch, only what the patch needs (the event's name and
//! namespace, its count and when it was last said), not the whole event: at 1,000 maintenances
//! at once kube-runtime's `Recorder`, which keeps a copy of every event and scans them all under
//! a lock at each publish, held about 3 MB and made every event wait for every other.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as KubeEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use tokio::time::Instant;

/// How long after an event was last said saying it again extends its series rather than
/// creating a new event (client-go's and kube-runtime's six minutes).
pub const SERIES_TTL: Duration = Duration::from_secs(6 * 60);

/// How often the events past [`SERIES_TTL`] are forgotten.
const FORGET_EVERY: Duration = Duration::from_secs(60);

/// The namespace events go to when their object has none (cluster-scoped objects), as in the
/// Go operator.
const CLUSTER_SCOPED_NAMESPACE: &str = "default";

/// One event to write.
#[derive(Debug, Clone, Copy)]
pub struct NewEvent<'a> {
    /// `Normal` or `Warning`.
    pub warning: bool,
    /// Its reason (`BeginMaintenance`).
    pub reason: &'a str,
    /// Its action (nmo's: the reason again, as the Go operator's recorder leaves it).
    pub action: &'a str,
    /// Its human-readable note.
    pub note: &'a str,
}

/// An event written, as much of it as extending its series takes.
#[derive(Debug)]
struct Written {
    name: String,
    namespace: String,
    count: i32,
    last_said: Instant,
}

/// The events written recently, by what makes two of them one series.
#[derive(Debug)]
struct Recent {
    by_key: HashMap<String, Written>,
    forgotten_at: Instant,
}

impl Recent {
    /// Forgets the events last said more than [`SERIES_TTL`] ago, at most once a minute.
    fn forget_old(&mut self, now: Instant) {
        if now.saturating_duration_since(self.forgotten_at) < FORGET_EVERY {
            return;
        }
        self.forgotten_at = now;
        self.by_key
            .retain(|_, written| now.saturating_duration_since(written.last_said) < SERIES_TTL);
    }
}

/// Writes Events as `controller` (`reportingController`), instance `instance`.
#[derive(Clone)]
pub struct EventWriter {
    client: Client,
    controller: String,
    instance: String,
    recent: Arc<Mutex<Recent>>,
}

/// What the next write of an event is.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    Create {
        namespace: String,
    },
    Extend {
        name: String,
        namespace: String,
        count: i32,
    },
}

impl EventWriter {
    /// A writer reporting as `controller`; `instance` defaults to the controller's name.
    pub fn new(client: Client, controller: &str, instance: Option<String>) -> Self {
        EventWriter {
            client,
            controller: controller.to_string(),
            instance: instance.unwrap_or_else(|| controller.to_string()),
            recent: Arc::new(Mutex::new(Recent {
                by_key: HashMap::new(),
                forgotten_at: Instant::now(),
            })),
        }
    }

    /// Writes `event` about `regarding`: a new Event, or the next count of its series.
    pub async fn publish(
        &self,
        event: &NewEvent<'_>,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let key = series_key(event, regarding);
        let next = self.next(&key, regarding);
        let now = Timestamp::now();
        let written = match next {
            Next::Extend {
                name,
                namespace,
                count,
            } => match self.extend(&name, &namespace, count, now).await {
                Ok(()) => Written {
                    name,
                    namespace,
                    count,
                    last_said: Instant::now(),
                },
                // The first event is gone (its TTL, or deleted by hand): start a new one.
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    self.create(event, regarding, namespace, now).await?
                }
                Err(error) => return Err(error),
            },
            Next::Create { namespace } => self.create(event, regarding, namespace, now).await?,
        };
        self.lock().by_key.insert(key, written);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.recent.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `key` extends a recent series, and where the event goes.
    fn next(&self, key: &str, regarding: &ObjectReference) -> Next {
        let mut recent = self.lock();
        let now = Instant::now();
        recent.forget_old(now);
        match recent.by_key.get(key) {
            Some(written) if now.saturating_duration_since(written.last_said) < SERIES_TTL => {
                Next::Extend {
                    name: written.name.clone(),
                    namespace: written.namespace.clone(),
                    count: written.count.saturating_add(1),
                }
            }
            _ => Next::Create {
                namespace: regarding
                    .namespace
                    .clone()
                    .unwrap_or_else(|| CLUSTER_SCOPED_NAMESPACE.to_string()),
            },
        }
    }

    async fn create(
        &self,
        event: &NewEvent<'_>,
        regarding: &ObjectReference,
        namespace: String,
        now: Timestamp,
    ) -> Result<Written, kube::Error> {
        let body = self.new_event(event, regarding, &namespace, now);
        let name = body.metadata.name.clone().unwrap_or_default();
        Api::<KubeEvent>::namespaced(self.client.clone(), &namespace)
            .create(&PostParams::default(), &body)
            .await?;
        Ok(Written {
            name,
            namespace,
            count: 1,
            last_said: Instant::now(),
        })
    }

    /// Patches the series of the event `name` to `count`, said at `now`.
    async fn extend(
        &self,
        name: &str,
        namespace: &str,
        count: i32,
        now: Timestamp,
    ) -> Result<(), kube::Error> {
        let patch = serde_json::json!({
            "series": EventSeries {
                count,
                last_observed_time: MicroTime(now),
            }
        });
        Api::<KubeEvent>::namespaced(self.client.clone(), namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
    }

    /// The Event object: named after its object and the time (`node-1.18c2f...`), as client-go
    /// names events.
    fn new_event(
        &self,
        event: &NewEvent<'_>,
        regarding: &ObjectReference,
        namespace: &str,
        now: Timestamp,
    ) -> KubeEvent {
        let object = regarding.name.as_deref().unwrap_or(&self.controller);
        KubeEvent {
            action: Some(event.action.to_string()),
            reason: Some(event.reason.to_string()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            note: Some(event.note.to_string()),
            metadata: ObjectMeta {
                namespace: Some(namespace.to_string()),
                name: Some(format!("{object}.{:x}", now.as_nanosecond())),
                ..ObjectMeta::default()
            },
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(if event.warning { "Warning" } else { "Normal" }.to_string()),
            ..KubeEvent::default()
        }
    }
}

/// What makes two events one series (client-go's rule): the same type, reason and action
/// about the same object. The note is not part of it: a series keeps its first note.
fn series_key(event: &NewEvent<'_>, regarding: &ObjectReference) -> String {
    let parts = [
        if event.warning { "Warning" } else { "Normal" },
        event.reason,
        event.action,
        regarding.api_version.as_deref().unwrap_or_default(),
        regarding.kind.as_deref().unwrap_or_default(),
        regarding.namespace.as_deref().unwrap_or_default(),
        regarding.name.as_deref().unwrap_or_default(),
        regarding.uid.as_deref().unwrap_or_default(),
    ];
    parts.join("\u{0}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..ObjectReference::default()
        }
    }

    const BEGIN: NewEvent<'static> = NewEvent {
        warning: false,
        reason: "BeginMaintenance",
        action: "BeginMaintenance",
        note: "Begin a node maintenance",
    };

    #[test]
    fn a_series_is_the_same_type_reason_and_action_about_the_same_object() {
        let key = series_key(&BEGIN, &node("n1"));
        let other_note = NewEvent {
            note: "another note",
            ..BEGIN
        };
        assert_eq!(series_key(&other_note, &node("n1")), key);
        assert_ne!(series_key(&BEGIN, &node("n2")), key);
        let warning = NewEvent {
            warning: true,
            ..BEGIN
        };
        assert_ne!(series_key(&warning, &node("n1")), key);
        let other_reason = NewEvent {
            reason: "SucceedMaintenance",
            ..BEGIN
        };
        assert_ne!(series_key(&other_reason, &node("n1")), key);
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_said_again_within_the_ttl_extends_its_series_and_later_starts_anew() {
        let writer = test_writer();
        let regarding = node("n1");
        let key = series_key(&BEGIN, &regarding);
        assert_eq!(
            writer.next(&key, &regarding),
            Next::Create {
                namespace: "default".into()
            }
        );
        writer.lock().by_key.insert(
            key.clone(),
            Written {
                name: "n1.abc".into(),
                namespace: "default".into(),
                count: 1,
                last_said: Instant::now(),
            },
        );
        tokio::time::advance(Duration::from_secs(5 * 60 + 59)).await;
        assert_eq!(
            writer.next(&key, &regarding),
            Next::Extend {
                name: "n1.abc".into(),
                namespace: "default".into(),
                count: 2
            }
        );
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(
            writer.next(&key, &regarding),
            Next::Create {
                namespace: "default".into()
            }
        );
        assert_eq!(
            writer.lock().by_key.len(),
            1,
            "forgotten at most once a minute"
        );
        tokio::time::advance(FORGET_EVERY).await;
        writer.next(&key, &regarding);
        assert!(
            writer.lock().by_key.is_empty(),
            "an event past its TTL is forgotten"
        );
    }

    #[tokio::test]
    async fn the_event_names_its_object_reporter_and_namespace() {
        let writer = test_writer();
        let now = Timestamp::now();
        let event = writer.new_event(&BEGIN, &node("n1"), "default", now);
        assert_eq!(event.metadata.namespace.as_deref(), Some("default"));
        assert!(
            event
                .metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("n1."))
        );
        assert_eq!(
            event.reporting_controller.as_deref(),
            Some("NodeMaintenance")
        );
        assert_eq!(event.reporting_instance.as_deref(), Some("nmo-0"));
        assert_eq!(event.type_.as_deref(), Some("Normal"));
        assert_eq!(event.note.as_deref(), Some("Begin a node maintenance"));
        assert!(event.series.is_none());
    }

    fn test_writer() -> EventWriter {
        let config = kube::Config::new("http://127.0.0.1:1".parse().expect("a URL"));
        let client = Client::try_from(config).expect("a client");
        EventWriter::new(client, "NodeMaintenance", Some("nmo-0".into()))
    }
}

//! Saying that another operator runs, or is gone: a log line, an event on the NodeMaintenance
//! CRD (cluster scoped: the event goes to `default`, where nmo's events go), and the detail of
//! `/readyz`.

use std::sync::Mutex;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::core::CustomResourceExt;

use super::readyz::CoexistenceStatus;
use super::sightings::Sighting;
use crate::cluster::event_writer::{EventWriter, NewEvent};
use crate::crd::NodeMaintenance;

/// The event's reason while another operator runs.
pub const RUNNING_REASON: &str = "GoOperatorRunning";
/// The event's reason once it is gone.
pub const GONE_REASON: &str = "GoOperatorGone";

/// Where the detection's news goes.
pub(super) struct Reporter {
    events: EventWriter,
    status: CoexistenceStatus,
    /// The last reason looking failed, said once until it changes.
    last_failure: Mutex<Option<String>>,
}

impl Reporter {
    pub(super) fn new(
        client: Client,
        instance: Option<String>,
        status: CoexistenceStatus,
    ) -> Reporter {
        Reporter {
            events: EventWriter::new(client, crate::cluster::CONTROLLER_NAME, instance),
            status,
            last_failure: Mutex::new(None),
        }
    }

    /// Looking failed; `first`: nmo has not looked successfully yet, so it goes on as if alone.
    pub(super) fn cannot_look(&self, why: &str, first: bool, for_good: bool) {
        let mut last = self
            .last_failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.as_deref() == Some(why) {
            return;
        }
        *last = Some(why.to_string());
        if first && for_good {
            tracing::warn!(
                error = %why,
                "cannot look for the Go operator's leader election lease; nmo drives nodes without knowing whether it runs"
            );
        } else if first {
            tracing::warn!(error = %why, "cannot look for the Go operator's leader election lease yet; nmo drives no node until it has looked");
        } else {
            tracing::warn!(error = %why, "cannot look for the Go operator's leader election lease; keeping the last verdict");
        }
    }

    /// What runs changed from `before` to `after`.
    pub(super) async fn changed(&self, before: &[Sighting], after: &[Sighting]) {
        *self
            .last_failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        for sighting in after.iter().filter(|s| !before.contains(s)) {
            tracing::warn!(
                namespace = %sighting.namespace,
                holder = %sighting.holder,
                "{}: nmo drives no node until it is gone",
                sighting
            );
            self.publish(true, RUNNING_REASON, &running_note(sighting))
                .await;
        }
        for sighting in before.iter().filter(|s| !after.contains(s)) {
            tracing::info!(
                namespace = %sighting.namespace,
                holder = %sighting.holder,
                "{} is gone (its leader election lease is no longer renewed)",
                sighting.kind.describe()
            );
        }
        match after.first() {
            Some(sighting) => self.status.set(format!(
                "paused: {sighting}; nmo drives no node until it is gone"
            )),
            None => {
                self.status.clear();
                if !before.is_empty() {
                    tracing::info!(
                        "no other node maintenance operator runs: nmo drives nodes again"
                    );
                    self.publish(
                        false,
                        GONE_REASON,
                        "No other node maintenance operator runs: nmo drives nodes again",
                    )
                    .await;
                }
            }
        }
    }

    async fn publish(&self, warning: bool, reason: &str, note: &str) {
        let event = NewEvent {
            warning,
            reason,
            action: reason,
            note,
        };
        if let Err(error) = self.events.publish(&event, &crd_reference()).await {
            tracing::warn!(%error, reason, "cannot publish the event");
        }
    }
}

/// The note of the event that says another operator runs.
pub(super) fn running_note(sighting: &Sighting) -> String {
    format!(
        "{sighting}: nmo drives no node until it is gone (maintenances under way are left as they are, for it to carry on)"
    )
}

/// The NodeMaintenance CRD, which the events are about.
fn crd_reference() -> ObjectReference {
    ObjectReference {
        api_version: Some("apiextensions.k8s.io/v1".into()),
        kind: Some("CustomResourceDefinition".into()),
        name: Some(NodeMaintenance::crd_name().into()),
        ..ObjectReference::default()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::coexistence::sightings::HolderKind;

    /// Log output captured in memory.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A client whose every request fails: the events are refused, the log still says it.
    fn unreachable_client() -> Client {
        let service = tower::service_fn(|_request: ::http::Request<kube::client::Body>| async {
            Err::<::http::Response<kube::client::Body>, _>(std::io::Error::other("no API server"))
        });
        Client::new(service, "nmo")
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_log_line_and_readyz_say_who_runs_and_that_nmo_waits_then_that_it_is_gone() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let _logs = tracing::subscriber::set_default(subscriber);
        let status = CoexistenceStatus::default();
        let reporter = Reporter::new(unreachable_client(), None, status.clone());
        let go = Sighting {
            namespace: "openshift-workload-availability".into(),
            holder: "nmo-controller-manager-x_1b4e28ba-2fa1-11d2-883f-0016d3cca427".into(),
            kind: HolderKind::GoOperator,
        };

        reporter.changed(&[], std::slice::from_ref(&go)).await;
        let detail = status.detail().expect("a /readyz detail");
        assert!(
            detail.starts_with("paused: the Go Node Maintenance Operator runs"),
            "{detail}"
        );
        assert!(detail.contains("openshift-workload-availability/135b1886.medik8s.io"));
        reporter.changed(std::slice::from_ref(&go), &[]).await;
        assert_eq!(status.detail(), None);

        let text = String::from_utf8_lossy(
            &captured
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
        .into_owned();
        assert!(
            text.contains("WARN")
                && text.contains("the Go Node Maintenance Operator runs")
                && text.contains("nmo drives no node until it is gone"),
            "{text}"
        );
        assert!(text.contains("nmo drives nodes again"), "{text}");
    }
}

//! How API errors map to the port's domain errors and eviction outcomes.

use std::time::Duration;

use kube::core::Status;
use nmo_actors::ports::{ClusterError, EvictionOutcome};

/// The cause type the eviction subresource puts on a refusal by a PodDisruptionBudget.
const DISRUPTION_BUDGET_CAUSE: &str = "DisruptionBudget";
/// The cause type of a refusal because the pod's namespace is being deleted.
const NAMESPACE_TERMINATING_CAUSE: &str = "NamespaceTerminating";
/// The phrase of the 500 the eviction subresource returns when several PDBs match a pod.
const MORE_THAN_ONE_PDB: &str = "more than one PodDisruptionBudget";

/// Maps a kube client error to the port's error, keeping the server's message.
pub fn to_cluster_error(error: kube::Error) -> ClusterError {
    match error {
        kube::Error::Api(status) => status_to_error(&status),
        other => ClusterError::Transient(other.to_string()),
    }
}

fn status_to_error(status: &Status) -> ClusterError {
    let message = status.message.clone();
    if status.is_already_exists() {
        return ClusterError::AlreadyExists(message);
    }
    match status.code {
        404 => ClusterError::NotFound(message),
        409 => ClusterError::Conflict(message),
        401 | 403 => ClusterError::Forbidden(message),
        400 | 422 if is_failed_patch_test(status) => ClusterError::Conflict(message),
        400 | 422 => ClusterError::Invalid(message),
        408 | 429 | 500..=599 => ClusterError::Transient(message),
        _ => ClusterError::Other(message),
    }
}

/// The message of kube-apiserver's 422 for a JSON patch it could not apply: a `test` op that
/// did not match, or a path the object does not have. Its details are empty (nmo-sim's
/// fidelity suite, against kube-apiserver 1.36).
const PATCH_NOT_APPLICABLE: &str = "the server rejected our request due to an error in our request";

/// A JSON patch whose `test` op did not match: someone changed the object since it was read.
/// A real API server answers 422 with [`PATCH_NOT_APPLICABLE`] and nothing more; other servers
/// put the patch library's own text ("testing value /spec/taints failed: test failed") in the
/// message or a cause. nmo's patches never remove a path they have not tested, so a patch that
/// does not apply means the object changed: re-read and retry.
fn is_failed_patch_test(status: &Status) -> bool {
    let mentions_test = |text: &str| {
        let text = text.to_ascii_lowercase();
        text.contains("testing value")
            || text.contains("test failed")
            || text.contains("test operation")
    };
    status.message == PATCH_NOT_APPLICABLE
        || mentions_test(&status.message)
        || status
            .details
            .iter()
            .flat_map(|details| details.causes.iter())
            .any(|cause| mentions_test(&cause.message))
}

/// Whether a 409 is the refusal of a uid precondition: the object of that name is another one
/// (deleted and created again). The API server says so in one of two ways: the storage's
/// precondition check, or the eviction's own check before it marks the pod (Kubernetes 1.26+,
/// with the `DisruptionTarget` condition).
fn is_uid_precondition_failure(status: &Status) -> bool {
    status.code == 409
        && (status.message.contains("UID in precondition")
            || status.message.contains("UID in the precondition"))
}

/// Maps the error of a pod deletion with a uid precondition: a failed precondition means the
/// pod asked for is gone (`NotFound`), never "try again" against the pod that has its name now.
pub fn deletion_error(error: kube::Error) -> ClusterError {
    match error {
        kube::Error::Api(status) if is_uid_precondition_failure(&status) => {
            ClusterError::NotFound(status.message.clone())
        }
        other => to_cluster_error(other),
    }
}

/// The webhook named by the API server's refusal on an admission webhook's behalf:
/// `admission webhook "<name>" denied the request[: <message>]` (k8s.io/apiserver's
/// `webhookerrors.ToStatusErr`, for validating and mutating webhooks alike).
fn denying_webhook(message: &str) -> Option<String> {
    let rest = message.strip_prefix("admission webhook \"")?;
    let (name, after) = rest.split_once('"')?;
    after
        .starts_with(" denied the request")
        .then(|| name.to_string())
}

/// Reads the result of an eviction request.
pub fn eviction_outcome(
    result: Result<Status, kube::Error>,
) -> Result<EvictionOutcome, ClusterError> {
    let status = match result {
        Ok(_) => return Ok(EvictionOutcome::Evicted),
        Err(kube::Error::Api(status)) => status,
        Err(other) => return Err(ClusterError::Transient(other.to_string())),
    };
    let causes = status
        .details
        .as_ref()
        .map(|d| d.causes.as_slice())
        .unwrap_or_default();
    let retry_after = status
        .details
        .as_ref()
        .map(|d| d.retry_after_seconds)
        .filter(|seconds| *seconds > 0)
        .map(|seconds| Duration::from_secs(u64::from(seconds)));
    if let Some(webhook) = denying_webhook(&status.message) {
        // Whatever its code: KubeVirt answers 429, the Drain Cleaner 500, and a webhook that
        // sets none gets the API server's 403.
        return Ok(EvictionOutcome::DeniedByWebhook {
            webhook,
            message: status.message.clone(),
            code: status.code,
        });
    }
    if is_uid_precondition_failure(&status) {
        // The pod decided on is gone; another has its name.
        return Ok(EvictionOutcome::NotFound);
    }
    match status.code {
        404 => Ok(EvictionOutcome::NotFound),
        429 => match causes.iter().find(|c| c.reason == DISRUPTION_BUDGET_CAUSE) {
            Some(cause) => Ok(EvictionOutcome::BlockedByPdb {
                pdb: pdb_name(&cause.message),
                message: cause.message.clone(),
                retry_after,
            }),
            None if status.message.contains("disruption budget") => {
                Ok(EvictionOutcome::BlockedByPdb {
                    pdb: None,
                    message: status.message.clone(),
                    retry_after,
                })
            }
            None => Ok(EvictionOutcome::Throttled { retry_after }),
        },
        500 if status.message.contains(MORE_THAN_ONE_PDB) => Ok(EvictionOutcome::TooManyPdbs {
            message: status.message.clone(),
        }),
        _ if causes
            .iter()
            .any(|c| c.reason == NAMESPACE_TERMINATING_CAUSE) =>
        {
            Ok(EvictionOutcome::NamespaceTerminating)
        }
        _ => Err(status_to_error(&status)),
    }
}

/// The PDB's name from the cause text `The disruption budget <name> needs ...` or
/// `The disruption budget <name> is still being processed by the server.`.
fn pdb_name(cause: &str) -> Option<String> {
    let rest = cause.strip_prefix("The disruption budget ")?;
    let name = rest.split_whitespace().next()?;
    Some(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::response::{StatusCause, StatusDetails};

    fn refusal(code: u16, message: &str, causes: Vec<StatusCause>) -> kube::Error {
        let details = StatusDetails {
            name: "web-1".into(),
            group: String::new(),
            kind: "pods".into(),
            uid: String::new(),
            causes,
            retry_after_seconds: 0,
        };
        kube::Error::Api(
            Status::failure(message, "TooManyRequests")
                .with_code(code)
                .with_details(details)
                .boxed(),
        )
    }

    #[test]
    fn a_pdb_refusal_names_the_pdb_and_keeps_its_numbers() {
        let cause = StatusCause {
            reason: "DisruptionBudget".into(),
            message: "The disruption budget web needs 2 healthy pods and has 2 currently".into(),
            field: String::new(),
        };
        let outcome = eviction_outcome(Err(refusal(
            429,
            "Cannot evict pod as it would violate the pod's disruption budget.",
            vec![cause],
        )));
        assert_eq!(
            outcome,
            Ok(EvictionOutcome::BlockedByPdb {
                pdb: Some("web".into()),
                message: "The disruption budget web needs 2 healthy pods and has 2 currently"
                    .into(),
                retry_after: None,
            })
        );
    }

    #[test]
    fn a_429_without_a_pdb_is_throttling() {
        let outcome = eviction_outcome(Err(refusal(429, "Too many requests", vec![])));
        assert_eq!(
            outcome,
            Ok(EvictionOutcome::Throttled { retry_after: None })
        );
    }

    #[test]
    fn several_pdbs_and_missing_pods_are_told_apart() {
        let several = eviction_outcome(Err(refusal(
            500,
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            vec![],
        )));
        assert!(matches!(several, Ok(EvictionOutcome::TooManyPdbs { .. })));
        let missing = eviction_outcome(Err(refusal(404, "pods \"web-1\" not found", vec![])));
        assert_eq!(missing, Ok(EvictionOutcome::NotFound));
        let other = eviction_outcome(Err(refusal(500, "etcd timeout", vec![])));
        assert!(matches!(other, Err(ClusterError::Transient(_))));
    }

    #[test]
    fn a_webhook_refusal_of_any_code_is_told_apart_from_throttling_and_errors() {
        let kubevirt = "admission webhook \"virt-launcher-eviction-interceptor.kubevirt.io\" \
                        denied the request: Eviction triggered evacuation of VMI \"vms/vm-a\"";
        let strimzi = "admission webhook \"strimzi-drain-cleaner.strimzi.io\" denied the \
                       request: The pod will be rolled by the Strimzi Cluster Operator";
        let silent =
            "admission webhook \"guard.example.com\" denied the request without explanation";
        for (code, message, webhook) in [
            (
                429,
                kubevirt,
                "virt-launcher-eviction-interceptor.kubevirt.io",
            ),
            (500, strimzi, "strimzi-drain-cleaner.strimzi.io"),
            (403, silent, "guard.example.com"),
        ] {
            let outcome = eviction_outcome(Err(refusal(code, message, vec![])));
            assert_eq!(
                outcome,
                Ok(EvictionOutcome::DeniedByWebhook {
                    webhook: webhook.into(),
                    message: message.into(),
                    code,
                })
            );
        }
        assert_eq!(denying_webhook("admission webhook \"x\" is unhappy"), None);
    }

    #[test]
    fn a_failed_uid_precondition_means_the_pod_is_gone() {
        for message in [
            "Precondition failed: UID in precondition: a, UID in object meta: b",
            "Operation cannot be fulfilled on Pod \"web-0\": the UID in the precondition (a) \
             does not match the UID in record (b). The object might have been deleted and then \
             recreated",
        ] {
            let outcome = eviction_outcome(Err(refusal(409, message, vec![])));
            assert_eq!(outcome, Ok(EvictionOutcome::NotFound), "{message}");
            let deleted = deletion_error(refusal(409, message, vec![]));
            assert!(matches!(deleted, ClusterError::NotFound(_)), "{message}");
        }
        let other = deletion_error(refusal(409, "the object has been modified", vec![]));
        assert!(matches!(other, ClusterError::Conflict(_)));
    }

    #[test]
    fn a_failed_patch_test_is_a_conflict() {
        let cause = StatusCause {
            reason: "UnexpectedServerResponse".into(),
            message: "testing value /spec/taints failed: test failed".into(),
            field: String::new(),
        };
        let details = StatusDetails {
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
            causes: vec![cause],
            retry_after_seconds: 0,
        };
        let status = Status::failure(
            "the server rejected our request due to an error in our request",
            "Invalid",
        )
        .with_code(422)
        .with_details(details);
        assert!(matches!(
            status_to_error(&status),
            ClusterError::Conflict(_)
        ));
        let invalid = Status::failure("spec.foo: Invalid value", "Invalid").with_code(422);
        assert!(matches!(
            status_to_error(&invalid),
            ClusterError::Invalid(_)
        ));
    }
    /// What kube-apiserver 1.36 really answers to a JSON patch whose `test` fails (found by
    /// nmo-sim's fidelity suite): the generic message, empty details, no cause naming the test.
    #[test]
    fn a_failed_patch_test_as_a_real_server_reports_it_is_a_conflict() {
        let status = Status::failure(
            "the server rejected our request due to an error in our request",
            "Invalid",
        )
        .with_code(422)
        .with_details(StatusDetails {
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
            causes: Vec::new(),
            retry_after_seconds: 0,
        });
        assert!(matches!(
            status_to_error(&status),
            ClusterError::Conflict(_)
        ));
    }
}

//! What an eviction call's result is called in metrics and spans.

use crate::observe::EvictionResult;
use crate::ports::{ClusterError, EvictionOutcome};

/// The metric label of a call's result, and its HTTP status when known.
pub(super) fn classify(
    result: &Result<EvictionOutcome, ClusterError>,
) -> (EvictionResult, Option<u16>) {
    match result {
        Ok(EvictionOutcome::Evicted) => (EvictionResult::Evicted, Some(201)),
        Ok(EvictionOutcome::NotFound) => (EvictionResult::NotFound, Some(404)),
        Ok(EvictionOutcome::BlockedByPdb { .. }) => (EvictionResult::BlockedByPdb, Some(429)),
        Ok(EvictionOutcome::Throttled { .. }) => (EvictionResult::Throttled, Some(429)),
        Ok(EvictionOutcome::TooManyPdbs { .. }) => (EvictionResult::TooManyPdbs, Some(500)),
        Ok(EvictionOutcome::NamespaceTerminating) => {
            (EvictionResult::NamespaceTerminating, Some(403))
        }
        Ok(EvictionOutcome::DeniedByWebhook { code, .. }) => {
            (EvictionResult::DeniedByWebhook, Some(*code))
        }
        Err(err) => {
            let status = match err {
                ClusterError::NotFound(_) => Some(404),
                ClusterError::Conflict(_) | ClusterError::AlreadyExists(_) => Some(409),
                ClusterError::Invalid(_) => Some(422),
                ClusterError::Forbidden(_) => Some(403),
                ClusterError::Transient(_)
                | ClusterError::NotLeader(_)
                | ClusterError::Other(_) => None,
            };
            (EvictionResult::Error, status)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_and_errors_get_their_http_status() {
        let blocked = Ok(EvictionOutcome::BlockedByPdb {
            pdb: None,
            message: String::new(),
            retry_after: None,
        });
        assert_eq!(
            classify(&blocked),
            (EvictionResult::BlockedByPdb, Some(429))
        );
        assert_eq!(
            classify(&Ok(EvictionOutcome::Throttled { retry_after: None })),
            (EvictionResult::Throttled, Some(429))
        );
        assert_eq!(
            classify(&Err(ClusterError::Forbidden("rbac".into()))),
            (EvictionResult::Error, Some(403))
        );
        assert_eq!(
            classify(&Err(ClusterError::Transient("timeout".into()))),
            (EvictionResult::Error, None)
        );
    }
}

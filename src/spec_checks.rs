//! The limits of a NodeMaintenance's spec, and nmo's own check of them.
//!
//! The CRD's schema enforces them (see `crate::crd`): `spec.nodeName` a DNS-1123 subdomain of
//! at most 253 characters (a node's name), immutable; `spec.reason` at most
//! [`REASON_MAX_LENGTH`] characters; `spec.drainTimeout` at most [`DRAIN_TIMEOUT_MAX`]. An
//! object created before the schema had them (or under a schema someone replaced) can still
//! break them, so nmo checks them too ([`problem`]): such a NodeMaintenance is Failed before
//! it touches anything, with a `lastError` that names the field. (`nodeName: ""` would
//! otherwise watch every unscheduled pod of the cluster; `n1/status` would read node `n1`'s
//! status and slip past the duplicate check; a drain timeout too large for Go meant no
//! deadline at all.)

use nmo_actors::model::{SpecField, SpecProblem, bounded};

use crate::crd::{
    DRAIN_TIMEOUT_MAX, DRAIN_TIMEOUT_MAX_LENGTH, DRAIN_TIMEOUT_MAX_TEXT, NODE_NAME_MAX_LENGTH,
    NodeMaintenanceSpec, REASON_MAX_LENGTH,
};

/// Whether `name` is a DNS-1123 subdomain (what a node's name is).
pub fn is_dns1123_subdomain(name: &str) -> bool {
    let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= NODE_NAME_MAX_LENGTH
        && name.split('.').all(|label| {
            label.starts_with(alphanumeric)
                && label.ends_with(alphanumeric)
                && label.chars().all(|c| alphanumeric(c) || c == '-')
        })
}

/// What is wrong with `spec`, naming the field, if anything.
pub fn problem(spec: &NodeMaintenanceSpec) -> Option<SpecProblem> {
    let problem = |field, message| Some(SpecProblem { field, message });
    if !is_dns1123_subdomain(&spec.node_name) {
        return problem(
            SpecField::NodeName,
            format!(
                "invalid spec.nodeName {:?}: a node name is a DNS-1123 subdomain (lower case \
             letters, digits, '-' and '.', at most {NODE_NAME_MAX_LENGTH} characters)",
                bounded(&spec.node_name, 64)
            ),
        );
    }
    if let Some(reason) = &spec.reason
        && reason.chars().count() > REASON_MAX_LENGTH
    {
        let message = format!(
            "invalid spec.reason: {} characters, at most {REASON_MAX_LENGTH} are allowed",
            reason.chars().count()
        );
        return problem(SpecField::Reason, message);
    }
    let timeout = spec.drain_timeout.as_deref()?;
    match crate::drain_timeout::parse(timeout) {
        Err(error) => problem(SpecField::DrainTimeout, error.to_string()),
        Ok(parsed) if parsed > DRAIN_TIMEOUT_MAX || timeout.len() > DRAIN_TIMEOUT_MAX_LENGTH => {
            let message = format!(
                "invalid spec.drainTimeout {:?}: at most {DRAIN_TIMEOUT_MAX_TEXT}",
                bounded(timeout, 64)
            );
            problem(SpecField::DrainTimeout, message)
        }
        Ok(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(node: &str) -> NodeMaintenanceSpec {
        NodeMaintenanceSpec {
            node_name: node.to_string(),
            ..NodeMaintenanceSpec::default()
        }
    }

    #[test]
    fn node_names_are_dns1123_subdomains() {
        for good in ["n1", "worker-1.example.com", "0", "a-b"] {
            assert!(is_dns1123_subdomain(good), "{good}");
            assert_eq!(problem(&spec(good)), None);
        }
        let long = "a".repeat(254);
        for bad in [
            "",
            "n1/status",
            "Node1",
            "-n1",
            "n1-",
            "a..b",
            ".",
            long.as_str(),
        ] {
            assert!(!is_dns1123_subdomain(bad), "{bad}");
            let problem = problem(&spec(bad)).expect("a problem");
            assert_eq!(problem.field, SpecField::NodeName);
            assert!(problem.message.contains("spec.nodeName"), "{problem:?}");
        }
    }

    #[test]
    fn a_reason_and_a_drain_timeout_are_bounded() {
        let mut long = spec("n1");
        long.reason = Some("x".repeat(REASON_MAX_LENGTH + 1));
        let found = problem(&long).expect("a problem");
        assert_eq!(found.field, SpecField::Reason);
        assert!(found.message.contains("spec.reason"));
        long.reason = Some("x".repeat(REASON_MAX_LENGTH));
        assert_eq!(problem(&long), None);
        for (timeout, bad) in [
            ("30m", false),
            ("720h", false),
            ("721h", true),
            ("99999999999999999999h", true),
            ("soon", true),
        ] {
            let mut with = spec("n1");
            with.drain_timeout = Some(timeout.into());
            let found = problem(&with);
            assert_eq!(found.is_some(), bad, "{timeout}: {found:?}");
            if let Some(found) = found {
                assert_eq!(found.field, SpecField::DrainTimeout);
                assert!(found.message.contains("spec.drainTimeout"), "{found:?}");
            }
        }
    }
}

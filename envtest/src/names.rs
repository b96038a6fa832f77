//! Unique object names: the tests of one binary share one control plane and keep out of each
//! other's way by naming their nodes and namespaces uniquely.

use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The longest DNS-1123 label (namespace names; node names may be longer, never shorter).
const MAX_LABEL: usize = 63;

/// `prefix` made a valid DNS-1123 label, then `-<n>-<pid>` with `n` counting calls in this
/// process: unique within the process, and between processes sharing one control plane.
pub fn unique_name(prefix: &str) -> String {
    let number = COUNTER.fetch_add(1, Ordering::Relaxed);
    let suffix = format!("-{number}-{}", std::process::id());
    let mut base: String = prefix
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    base.truncate(MAX_LABEL - suffix.len());
    let base = base.trim_matches('-');
    let base = if base.is_empty() { "x" } else { base };
    format!("{base}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_dns_label(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= MAX_LABEL
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !name.starts_with('-')
            && !name.ends_with('-')
    }

    #[test]
    fn names_are_unique_labels() {
        let a = unique_name("Node_A");
        let b = unique_name("Node_A");
        assert_ne!(a, b);
        assert!(a.starts_with("node-a-"), "{a}");
        for name in [
            a,
            b,
            unique_name(""),
            unique_name("--"),
            unique_name(&"x".repeat(100)),
        ] {
            assert!(is_dns_label(&name), "{name}");
        }
    }
}

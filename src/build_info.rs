//! What nmo was built from: its version and git commit (embedded by `build.rs`), for
//! `nmo --version`, the start-up log line, the `nmo_build_info` metric and the traces'
//! `service.version`.

/// The package version (`0.1.0`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit nmo was built from, or `unknown` (an image build without `NMO_GIT_COMMIT`).
pub const COMMIT: &str = env!("NMO_GIT_COMMIT");

/// `nmo --version`'s text: `0.1.0 (commit 1a2b3c...)`.
pub const VERSION_LINE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("NMO_GIT_COMMIT"),
    ")"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commit_is_a_git_hash_or_unknown() {
        let hash = COMMIT.len() >= 7 && COMMIT.chars().all(|c| c.is_ascii_hexdigit());
        assert!(hash || COMMIT == "unknown", "{COMMIT}");
        assert!(VERSION_LINE.contains(COMMIT) && VERSION_LINE.starts_with(VERSION));
    }
}

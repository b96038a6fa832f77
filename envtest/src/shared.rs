//! One control plane per test binary: started by the first test that asks, shared by the rest.
//! A static is never dropped, so its processes and directory go when the process ends (see
//! `process.rs` and `rundir.rs`).

use std::sync::OnceLock;

use crate::control_plane::ControlPlane;
use crate::error::Error;
use crate::options::Options;

static SHARED: OnceLock<Result<ControlPlane, Error>> = OnceLock::new();

/// Why the shared control plane is not available.
#[derive(Debug, thiserror::Error)]
pub enum SharedError {
    /// It failed to start (every caller gets this same error).
    #[error(transparent)]
    Start(&'static Error),
    /// It runs, but a component this caller asked for failed to start.
    #[error(transparent)]
    Component(Error),
}

impl ControlPlane {
    /// The binary's control plane with every component ([`Options::default`]).
    pub fn shared() -> Result<&'static ControlPlane, SharedError> {
        ControlPlane::shared_with(&Options::default())
    }

    /// The binary's control plane, started with `options` by the first caller. A later caller
    /// asking for a component not yet running gets it started; its other options are those of
    /// the first caller. A failed start fails every caller with the same error (no retry: the
    /// cause, such as missing binaries, would not go away).
    pub fn shared_with(options: &Options) -> Result<&'static ControlPlane, SharedError> {
        let started = SHARED.get_or_init(|| ControlPlane::start(options.clone()));
        let control_plane = started.as_ref().map_err(SharedError::Start)?;
        control_plane
            .ensure(options)
            .map_err(SharedError::Component)?;
        Ok(control_plane)
    }
}

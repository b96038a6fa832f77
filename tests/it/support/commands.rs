//! Commands a test runs (kubectl, cargo, the nmo binary): failing the test, with the command's
//! own words, when one does not succeed.

use std::fmt::Display;
use std::process::Output;

/// Fails the test unless `output` is a success, saying `what` and the command's stdout and
/// stderr when it is not.
pub fn assert_success(output: &Output, what: impl Display) {
    assert!(
        output.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

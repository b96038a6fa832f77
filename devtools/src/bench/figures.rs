//! What every benchmark result is made of: a figure held against its target, and the
//! percentile its figures are read with (a leaf module: results and their parts both use it).

use std::time::Duration;

use serde::Serialize;

/// A figure held against its target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Target {
    /// What is measured.
    pub what: String,
    /// The target, e.g. `<= 5 s`.
    pub target: String,
    /// The figure.
    pub actual: String,
    /// Whether it is met.
    pub met: bool,
}

/// A figure held against its target.
pub fn target(what: &str, target: String, actual: String, met: bool) -> Target {
    Target {
        what: what.into(),
        target,
        actual,
        met,
    }
}

/// Nearest-rank percentile (`q` in 0..=1) of unsorted durations, in seconds.
pub fn percentile(durations: &[Duration], q: f64) -> f64 {
    if durations.is_empty() {
        return 0.0;
    }
    let mut sorted: Vec<f64> = durations.iter().map(Duration::as_secs_f64).collect();
    sorted.sort_by(f64::total_cmp);
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a rank between 0 and the count (or 0 for NaN), clamped below"
    )]
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

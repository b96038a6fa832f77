//! `spec.drainTimeout`: a Go duration (`30m`, `1h30m`, `90s`), as the Go operator's users write
//! durations. The CRD schema checks its form with [`PATTERN`] (so the API server refuses
//! nonsense even without the webhook); the webhook and nmo parse it as Go's
//! `time.ParseDuration` does and refuse zero.

use std::time::Duration;

/// The form of a positive Go duration: numbers with units, no sign. What passes it parses,
/// except an amount too large for Go (about 292 years), which the webhook refuses.
pub const PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$";

/// A `drainTimeout` nmo cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrainTimeoutError {
    /// Not a Go duration.
    #[error(
        "invalid spec.drainTimeout {value:?}: {reason}; use a Go duration such as 30m or 1h30m"
    )]
    Invalid {
        /// As written.
        value: String,
        /// Why Go's parser refuses it.
        reason: String,
    },
    /// Zero or negative: the drain could never finish in time.
    #[error("invalid spec.drainTimeout {value:?}: it must be longer than zero")]
    NotPositive {
        /// As written.
        value: String,
    },
}

/// Parses a `drainTimeout` as Go does; zero and negative durations are refused.
pub fn parse(value: &str) -> Result<Duration, DrainTimeoutError> {
    let nanos = go_parse_duration::parse_duration(value).map_err(|error| {
        let go_parse_duration::Error::ParseError(reason) = error;
        DrainTimeoutError::Invalid {
            value: value.to_string(),
            reason,
        }
    })?;
    match u64::try_from(nanos) {
        Ok(nanos) if nanos > 0 => Ok(Duration::from_nanos(nanos)),
        _ => Err(DrainTimeoutError::NotPositive {
            value: value.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_as_go_parses_them() {
        assert_eq!(parse("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
    }

    #[test]
    fn nonsense_zero_and_negative_are_refused_with_a_hint() {
        for bad in ["30", "soon", "1d", "", "m"] {
            let error = parse(bad).expect_err(bad);
            assert!(
                matches!(error, DrainTimeoutError::Invalid { .. }),
                "{bad}: {error}"
            );
            assert!(error.to_string().contains("such as 30m"), "{error}");
        }
        assert!(matches!(
            parse("0s"),
            Err(DrainTimeoutError::NotPositive { .. })
        ));
        assert!(matches!(
            parse("-5m"),
            Err(DrainTimeoutError::NotPositive { .. })
        ));
    }
}

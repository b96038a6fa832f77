//! Durations on the command line, as the Go operator's flags take them (`15s`, `20m`, `1h30m`,
//! `1.5h`, `300ms`) and as nmo's took them before units (`15`, `0.5`: seconds).

use std::time::Duration;

/// Parses a duration flag: a plain number of seconds (`15`, `0.5`, `2.5s`), a unit expression
/// (`20m`, `1h30m`, `1h 30m`, `300ms`: humantime's grammar), or one fractional number with a
/// unit as Go writes it (`1.5h`, `0.25m`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let seconds = text.strip_suffix('s').unwrap_or(text);
    if let Some(duration) = seconds
        .parse::<f64>()
        .ok()
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
    {
        return Ok(duration);
    }
    match humantime::parse_duration(text) {
        Ok(duration) => Ok(duration),
        Err(error) => fractional_with_unit(text).ok_or_else(|| {
            format!("`{text}` is not a duration ({error}); write e.g. 15s, 20m, 1h30m or 1.5h")
        }),
    }
}

/// `1.5h`, `0.25m`, `2.5ms`: Go's `time.ParseDuration` takes a fraction before a unit,
/// humantime does not.
fn fractional_with_unit(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let unit_seconds = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(number * unit_seconds).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn plain_seconds_keep_working() {
        assert_eq!(parse_duration("15"), Ok(secs(15.0)));
        assert_eq!(parse_duration("0.5"), Ok(secs(0.5)));
        assert_eq!(parse_duration("2.5s"), Ok(secs(2.5)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
    }

    #[test]
    fn units_as_the_go_operator_writes_them() {
        assert_eq!(parse_duration("15s"), Ok(secs(15.0)));
        assert_eq!(parse_duration("20m"), Ok(secs(1200.0)));
        assert_eq!(parse_duration("1h"), Ok(secs(3600.0)));
        assert_eq!(parse_duration("1h30m"), Ok(secs(5400.0)));
        assert_eq!(parse_duration("1h 30m"), Ok(secs(5400.0)));
        assert_eq!(parse_duration("300ms"), Ok(secs(0.3)));
        assert_eq!(parse_duration("1.5h"), Ok(secs(5400.0)));
        assert_eq!(parse_duration("0.25m"), Ok(secs(15.0)));
    }

    #[test]
    fn nonsense_is_refused_with_an_example() {
        for bad in ["", "fast", "-1", "-5s", "1.5x", "NaN", "inf", "1..5h", "h"] {
            let error = parse_duration(bad).expect_err(bad);
            assert!(error.contains("e.g. 15s"), "{bad}: {error}");
        }
    }
}

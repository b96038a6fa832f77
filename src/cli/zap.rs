//! controller-runtime's `--zap-*` logging flags, which the Go operator's manifests may pass:
//! mapped to nmo's logging where they mean something (level, encoder, development mode, the
//! JSON lines' time encoding), accepted with a warning where they do not (stack traces).

use super::go_flags::parse_go_bool;
use crate::observability::telemetry::LogFormat;
use crate::observability::zap_json::TimeEncoding;

/// The `--zap-*` flags (controller-runtime's names and values).
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct ZapFlags {
    /// controller-runtime's development mode: text lines at debug level (false: JSON at info);
    /// --zap-encoder, --zap-log-level, --log-format and RUST_LOG say otherwise.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = parse_go_bool, value_name = "BOOL")]
    pub zap_devel: Option<bool>,
    /// Log encoding: json or console (text lines).
    #[arg(long, value_enum)]
    pub zap_encoder: Option<ZapEncoder>,
    /// Log level: debug, info, error, or an integer verbosity above 0 (1: debug, 2 or more:
    /// trace). Overrides RUST_LOG.
    #[arg(long, value_parser = parse_zap_level, value_name = "LEVEL")]
    pub zap_log_level: Option<ZapLevel>,
    /// Accepted for compatibility (info, error or panic); nmo logs no stack traces.
    #[arg(long, value_parser = ["info", "error", "panic"], value_name = "LEVEL")]
    pub zap_stacktrace_level: Option<String>,
    /// How JSON lines write `ts`: epoch, millis, nano, iso8601, rfc3339 (the default) or
    /// rfc3339nano.
    #[arg(long, value_enum, value_name = "ENCODING")]
    pub zap_time_encoding: Option<TimeEncoding>,
}

/// `--zap-encoder`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ZapEncoder {
    /// One JSON object per line.
    Json,
    /// Human readable lines.
    Console,
}

/// A `--zap-log-level`, as the `tracing` level it maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZapLevel(pub &'static str);

/// controller-runtime's level names, or a verbosity `n > 0` (zap level `-n`).
fn parse_zap_level(text: &str) -> Result<ZapLevel, String> {
    match text.to_ascii_lowercase().as_str() {
        "debug" => return Ok(ZapLevel("debug")),
        "info" => return Ok(ZapLevel("info")),
        "error" => return Ok(ZapLevel("error")),
        _ => {}
    }
    match text.parse::<i64>() {
        Ok(1) => Ok(ZapLevel("debug")),
        Ok(n) if n > 1 => Ok(ZapLevel("trace")),
        _ => Err(format!(
            "`{text}` is not a log level (debug, info, error, or a verbosity above 0)"
        )),
    }
}

impl ZapFlags {
    /// The log format these flags ask for, if they ask for one.
    pub fn format(&self) -> Option<LogFormat> {
        match (self.zap_encoder, self.zap_devel) {
            (Some(ZapEncoder::Json), _) => Some(LogFormat::Json),
            (Some(ZapEncoder::Console), _) | (None, Some(true)) => Some(LogFormat::Text),
            (None, Some(false)) => Some(LogFormat::Json),
            (None, None) => None,
        }
    }

    /// The level these flags ask for explicitly (it overrides RUST_LOG).
    pub fn level(&self) -> Option<&'static str> {
        self.zap_log_level.map(|ZapLevel(level)| level)
    }

    /// The level development mode implies when nothing else sets one.
    pub fn default_level(&self) -> Option<&'static str> {
        match self.zap_devel {
            Some(true) => Some("debug"),
            Some(false) => Some("info"),
            None => None,
        }
    }

    /// The flags given that nmo accepts but does not act on, as written on the command line.
    pub fn ignored(&self) -> Vec<String> {
        let mut ignored = Vec::new();
        if let Some(level) = &self.zap_stacktrace_level {
            ignored.push(format!("--zap-stacktrace-level={level}"));
        }
        ignored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_as_controller_runtime_names_them() {
        assert_eq!(parse_zap_level("info"), Ok(ZapLevel("info")));
        assert_eq!(parse_zap_level("DEBUG"), Ok(ZapLevel("debug")));
        assert_eq!(parse_zap_level("error"), Ok(ZapLevel("error")));
        assert_eq!(parse_zap_level("1"), Ok(ZapLevel("debug")));
        assert_eq!(parse_zap_level("5"), Ok(ZapLevel("trace")));
        for bad in ["0", "-1", "verbose", "warn2"] {
            assert!(parse_zap_level(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn encoder_then_development_mode_choose_the_format() {
        let flags = |encoder, devel| ZapFlags {
            zap_encoder: encoder,
            zap_devel: devel,
            ..ZapFlags::default()
        };
        assert_eq!(flags(None, None).format(), None);
        assert_eq!(flags(None, Some(true)).format(), Some(LogFormat::Text));
        assert_eq!(flags(None, Some(false)).format(), Some(LogFormat::Json));
        assert_eq!(
            flags(Some(ZapEncoder::Json), Some(true)).format(),
            Some(LogFormat::Json)
        );
        assert_eq!(
            flags(Some(ZapEncoder::Console), Some(false)).format(),
            Some(LogFormat::Text)
        );
    }

    #[test]
    fn stack_traces_are_named_as_ignored_and_the_time_encoding_is_not() {
        let flags = ZapFlags {
            zap_stacktrace_level: Some("error".into()),
            zap_time_encoding: Some(TimeEncoding::Epoch),
            ..ZapFlags::default()
        };
        assert_eq!(flags.ignored(), ["--zap-stacktrace-level=error"]);
        assert!(ZapFlags::default().ignored().is_empty());
    }
}

//! JSON log lines in zap's shape, the Go operator's (controller-runtime logs through zap): one
//! object per line, `level`, `ts`, `logger` (the module that logged), `caller` (file and line),
//! `msg`, then every field at the top level: the event's own, and those of the spans it is in,
//! so that a line inside a maintenance carries `nodemaintenance`, `node` and `trace_id` for
//! Loki or Elasticsearch to index, as the Go operator's lines carry `NodeMaintenance` fields.
//!
//! The spans' OpenTelemetry names become zap-style keys ([`FIELD_NAMES`]); a field set on an
//! inner span wins over the same field of an outer one, and the event's own fields over both.

use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// Span field names as the lines show them: the maintenance's, by the keys the Go operator's
/// users query.
pub const FIELD_NAMES: [(&str, &str); 6] = [
    ("nmo.maintenance", "nodemaintenance"),
    ("k8s.node.name", "node"),
    ("k8s.namespace.name", "namespace"),
    ("k8s.pod.name", "pod"),
    ("nmo.phase", "phase"),
    ("nmo.reason", "reason"),
];

/// How `ts` is written (`--zap-time-encoding`, controller-runtime's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum TimeEncoding {
    /// Seconds since the epoch, as a floating point number.
    Epoch,
    /// Milliseconds since the epoch, as a floating point number.
    Millis,
    /// Nanoseconds since the epoch, as an integer.
    Nano,
    /// ISO 8601 with milliseconds (`2006-01-02T15:04:05.000Z`).
    Iso8601,
    /// RFC 3339 to the second (`2006-01-02T15:04:05Z`), controller-runtime's default.
    #[default]
    Rfc3339,
    /// RFC 3339 with nanoseconds.
    Rfc3339nano,
}

impl TimeEncoding {
    /// `at` as `ts`.
    pub fn encode(self, at: DateTime<Utc>) -> Value {
        // Timestamps as floats lose sub-microsecond digits, as zap's do.
        #[allow(clippy::cast_precision_loss)]
        match self {
            TimeEncoding::Epoch => Value::from(at.timestamp_micros() as f64 / 1e6),
            TimeEncoding::Millis => Value::from(at.timestamp_micros() as f64 / 1e3),
            TimeEncoding::Nano => Value::from(at.timestamp_nanos_opt().unwrap_or(i64::MAX)),
            TimeEncoding::Iso8601 => Value::from(at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()),
            TimeEncoding::Rfc3339 => Value::from(at.to_rfc3339_opts(SecondsFormat::Secs, true)),
            TimeEncoding::Rfc3339nano => {
                Value::from(at.to_rfc3339_opts(SecondsFormat::Nanos, true))
            }
        }
    }
}

/// The zap-shaped line format; use with [`JsonFields`] as the span field formatter.
#[derive(Debug, Clone, Copy, Default)]
pub struct ZapJson {
    /// How `ts` is written.
    pub time: TimeEncoding,
}

/// zap's level names (zap has no trace level: its lowest is debug).
fn level(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "error",
        Level::WARN => "warn",
        Level::INFO => "info",
        Level::DEBUG | Level::TRACE => "debug",
    }
}

fn renamed(key: &str) -> String {
    FIELD_NAMES
        .iter()
        .find(|(from, _)| *from == key)
        .map_or_else(|| key.to_string(), |(_, to)| (*to).to_string())
}

impl<S> FormatEvent<S, JsonFields> for ZapJson
where
    S: Subscriber + for<'lookup> LookupSpan<'lookup>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let metadata = event.metadata();
        let mut fields = Map::new();
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                let Some(formatted) = extensions.get::<FormattedFields<JsonFields>>() else {
                    continue;
                };
                if let Ok(Value::Object(span_fields)) = serde_json::from_str(formatted.as_str()) {
                    for (key, value) in span_fields {
                        fields.insert(renamed(&key), value);
                    }
                }
            }
        }
        let mut visitor = EventFields::default();
        event.record(&mut visitor);
        fields.extend(visitor.fields);

        let mut head = Map::new();
        head.insert("level".into(), level(metadata.level()).into());
        head.insert("ts".into(), self.time.encode(Utc::now()));
        head.insert("logger".into(), metadata.target().into());
        if let (Some(file), Some(line)) = (metadata.file(), metadata.line()) {
            head.insert("caller".into(), format!("{file}:{line}").into());
        }
        head.insert("msg".into(), visitor.message.unwrap_or_default().into());
        // The fixed keys first, as zap writes them; then the fields.
        let mut line = String::from("{");
        for (key, value) in head.iter().chain(
            fields
                .iter()
                .filter(|(key, _)| !head.contains_key(key.as_str())),
        ) {
            if line.len() > 1 {
                line.push(',');
            }
            line.push_str(&Value::from(key.as_str()).to_string());
            line.push(':');
            line.push_str(&value.to_string());
        }
        line.push('}');
        writeln!(writer, "{line}")
    }
}

/// An event's fields as JSON values, its message apart.
#[derive(Default)]
struct EventFields {
    message: Option<String>,
    fields: Map<String, Value>,
}

impl EventFields {
    fn put(&mut self, field: &Field, value: Value) {
        if field.name() == "message" {
            self.message = Some(match value {
                Value::String(text) => text,
                other => other.to_string(),
            });
        } else {
            self.fields.insert(renamed(field.name()), value);
        }
    }
}

impl Visit for EventFields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, value.into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.into());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.into());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, value.to_string().into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Lines {
        type Writer = Lines;

        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    fn logged(time: TimeEncoding, log: impl FnOnce()) -> Vec<Value> {
        let lines = Lines::default();
        let layer = tracing_subscriber::fmt::layer()
            .fmt_fields(JsonFields::new())
            .event_format(ZapJson { time })
            .with_writer(lines.clone());
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, log);
        let text = String::from_utf8(lines.0.lock().unwrap_or_else(|e| e.into_inner()).clone())
            .expect("UTF-8");
        text.lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .collect()
    }

    #[test]
    fn lines_have_zap_s_keys_and_the_span_fields_at_the_top_level() {
        let lines = logged(TimeEncoding::Rfc3339, || {
            let root = tracing::info_span!(
                "maintenance",
                nmo.maintenance = "nm-1",
                k8s.node.name = "worker-1",
                trace_id = tracing::field::Empty,
            );
            root.record("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736");
            let _root = root.enter();
            let _drain = tracing::info_span!("drain", k8s.node.name = "worker-1").entered();
            tracing::warn!(
                pod = "web-0",
                attempts = 3_u64,
                "blocked by a PodDisruptionBudget"
            );
        });
        let [line] = &lines[..] else {
            panic!("one line: {lines:?}");
        };
        assert_eq!(line["level"], "warn");
        assert_eq!(line["msg"], "blocked by a PodDisruptionBudget");
        assert_eq!(line["logger"], module_path!());
        assert!(
            line["caller"]
                .as_str()
                .is_some_and(|c| c.starts_with("src/observability/zap_json.rs:")),
            "{line}"
        );
        assert!(
            DateTime::parse_from_rfc3339(line["ts"].as_str().unwrap_or_default()).is_ok(),
            "{line}"
        );
        assert_eq!(line["nodemaintenance"], "nm-1");
        assert_eq!(line["node"], "worker-1");
        assert_eq!(line["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(line["pod"], "web-0");
        assert_eq!(line["attempts"], 3);
        assert!(
            line.get("spans").is_none() && line.get("fields").is_none(),
            "{line}"
        );
    }

    #[test]
    fn the_time_is_written_as_asked() {
        let at = DateTime::parse_from_rfc3339("2026-03-01T12:00:00.123456789Z")
            .expect("a time")
            .with_timezone(&Utc);
        assert_eq!(TimeEncoding::Rfc3339.encode(at), "2026-03-01T12:00:00Z");
        assert_eq!(
            TimeEncoding::Rfc3339nano.encode(at),
            "2026-03-01T12:00:00.123456789Z"
        );
        assert_eq!(TimeEncoding::Iso8601.encode(at), "2026-03-01T12:00:00.123Z");
        assert_eq!(TimeEncoding::Nano.encode(at), 1_772_366_400_123_456_789_i64);
        assert_eq!(TimeEncoding::Epoch.encode(at), 1_772_366_400.123_456);
        assert_eq!(TimeEncoding::Millis.encode(at), 1_772_366_400_123.456);
        let lines = logged(TimeEncoding::Epoch, || tracing::info!("hello"));
        assert!(lines[0]["ts"].is_f64(), "{:?}", lines[0]);
    }
}

//! Logs and traces: a `tracing` subscriber that writes logs (text or JSON, filtered by
//! `RUST_LOG`) and, when an OTLP endpoint is configured through the standard OpenTelemetry
//! environment variables, exports spans over OTLP: gRPC (Jaeger receives it natively on 4317),
//! or HTTP with protobuf (4318) when `OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`.
//!
//! Log lines carry ANSI colours only when standard output is a terminal (and `NO_COLOR` is
//! unset): a pod's log or a file gets plain text. JSON lines have zap's shape (`zap_json`): the
//! message and every field, the enclosing spans' included, at the top level (what Loki and
//! Elasticsearch index).
//!
//! The OpenTelemetry layer is installed even when nothing is exported: it gives every
//! maintenance a trace id, which its log lines carry (`trace_id` on the trace root's span).

use std::io::IsTerminal;
use std::time::Duration;

use nmo_actors::observe::{LOGS_ONLY_TARGET, TraceAnchor};
use opentelemetry::KeyValue;
use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Level;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::filter::{EnvFilter, LevelFilter, Targets};
use tracing_subscriber::fmt::format::JsonFields;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};

use super::otlp_http::{HttpClientError, RuntimeHttpClient};
use super::zap_json::{TimeEncoding, ZapJson};
use crate::build_info;

/// The service name traces carry when `OTEL_SERVICE_NAME` does not say otherwise.
const DEFAULT_SERVICE_NAME: &str = "nmo";
/// How long shutdown waits for the last spans to reach the collector.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one OTLP/HTTP export may take (the OpenTelemetry default).
const HTTP_EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human readable lines.
    Text,
    /// One JSON object per line in zap's shape (the Go operator's): `level`, `ts`, `logger`,
    /// `caller`, `msg`, and the fields of the event and of its spans at the top level.
    Json,
}

/// How the operator logs, from its flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    /// Text or JSON lines.
    pub format: LogFormat,
    /// The filter when RUST_LOG is unset or unusable, e.g. `info`.
    pub default_filter: String,
    /// A filter that wins over RUST_LOG (`--zap-log-level`).
    pub forced_filter: Option<String>,
    /// How JSON lines write their time (`--zap-time-encoding`).
    pub time_encoding: TimeEncoding,
}

impl LogSettings {
    /// The filter directives in force: the forced one, else RUST_LOG when it parses, else the
    /// default.
    pub fn effective_filter(&self) -> String {
        if let Some(forced) = &self.forced_filter {
            return forced.clone();
        }
        match std::env::var(EnvFilter::DEFAULT_ENV) {
            Ok(directives) if EnvFilter::try_new(&directives).is_ok() => directives,
            _ => self.default_filter.clone(),
        }
    }
}

/// The OTLP transports nmo exports traces over (`OTEL_EXPORTER_OTLP_PROTOCOL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// `grpc`: OTLP/gRPC (port 4317), nmo's default.
    Grpc,
    /// `http/protobuf`: OTLP/HTTP with binary protobuf bodies (port 4318).
    HttpProtobuf,
}

impl OtlpProtocol {
    /// The protocol named by `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` (`traces`), else
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` (`general`), else gRPC. A value nmo cannot export with is
    /// an error, never silently another transport.
    pub fn choose(traces: Option<&str>, general: Option<&str>) -> Result<Self, TelemetryError> {
        let named = [traces, general]
            .into_iter()
            .flatten()
            .map(str::trim)
            .find(|value| !value.is_empty());
        match named {
            None => Ok(OtlpProtocol::Grpc),
            Some(value) => match value.to_ascii_lowercase().as_str() {
                "grpc" => Ok(OtlpProtocol::Grpc),
                "http/protobuf" => Ok(OtlpProtocol::HttpProtobuf),
                _ => Err(TelemetryError::Protocol(value.to_string())),
            },
        }
    }

    /// The protocol's name in the OpenTelemetry environment variables.
    pub fn as_str(self) -> &'static str {
        match self {
            OtlpProtocol::Grpc => "grpc",
            OtlpProtocol::HttpProtobuf => "http/protobuf",
        }
    }
}

/// Where and how traces are exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpSettings {
    /// The transport.
    pub protocol: OtlpProtocol,
    /// The collector's URL (for OTLP/HTTP the full URL, `.../v1/traces`); None: the exporter
    /// reads `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` itself.
    pub endpoint: Option<String>,
}

impl OtlpSettings {
    /// The settings of the standard environment variables; None when they name no endpoint.
    pub fn from_env() -> Result<Option<Self>, TelemetryError> {
        if !otlp_configured() {
            return Ok(None);
        }
        let var = |name: &str| std::env::var(name).ok();
        let protocol = OtlpProtocol::choose(
            var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").as_deref(),
            var("OTEL_EXPORTER_OTLP_PROTOCOL").as_deref(),
        )?;
        Ok(Some(OtlpSettings {
            protocol,
            endpoint: None,
        }))
    }
}

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The OTLP exporter could not be built from the environment.
    #[error("cannot build the OTLP exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// The OTLP protocol asked for is not one nmo exports with.
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL `{0}` is not supported: use grpc (port 4317) or http/protobuf (port 4318)"
    )]
    Protocol(String),
    /// The OTLP/HTTP client could not be built.
    #[error(transparent)]
    HttpClient(#[from] HttpClientError),
    /// A global subscriber was already installed.
    #[error("cannot install the tracing subscriber: {0}")]
    Subscriber(#[from] tracing_subscriber::util::TryInitError),
}

/// The installed telemetry; call [`Telemetry::shutdown`] before exiting so the last spans are
/// exported.
pub struct Telemetry {
    provider: SdkTracerProvider,
    exporting: Option<OtlpSettings>,
}

/// Whether the environment names an OTLP endpoint for traces.
pub fn otlp_configured() -> bool {
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|name| std::env::var(name).is_ok_and(|value| !value.trim().is_empty()))
}

/// The tracer provider for the standard environment variables, or None when no endpoint is set
/// (then nothing is exported and nothing complains). Must run inside a multi-thread tokio
/// runtime: the gRPC channel lives there.
pub fn tracer_provider() -> Result<Option<SdkTracerProvider>, TelemetryError> {
    match OtlpSettings::from_env()? {
        Some(settings) => tracer_provider_for(&settings).map(Some),
        None => Ok(None),
    }
}

/// The tracer provider exporting as `settings` say, batched. Must run inside a multi-thread
/// tokio runtime (the gRPC channel and the HTTP client's requests run there).
pub fn tracer_provider_for(settings: &OtlpSettings) -> Result<SdkTracerProvider, TelemetryError> {
    let exporter = span_exporter(settings)?;
    // The sampler comes from OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG (the SDK's default
    // configuration reads them).
    Ok(SdkTracerProvider::builder()
        .with_resource(resource())
        .with_batch_exporter(exporter)
        .build())
}

/// The exporter for `settings`; it reads the endpoint (unless given), headers, timeout and
/// compression from OTEL_EXPORTER_OTLP_*.
fn span_exporter(settings: &OtlpSettings) -> Result<SpanExporter, TelemetryError> {
    let exporter = match settings.protocol {
        OtlpProtocol::Grpc => {
            let builder = SpanExporter::builder().with_tonic();
            match &settings.endpoint {
                Some(endpoint) => builder.with_endpoint(endpoint.clone()).build()?,
                None => builder.build()?,
            }
        }
        OtlpProtocol::HttpProtobuf => {
            let builder = SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_http_client(RuntimeHttpClient::new(HTTP_EXPORT_TIMEOUT)?);
            match &settings.endpoint {
                Some(endpoint) => builder.with_endpoint(endpoint.clone()).build()?,
                None => builder.build()?,
            }
        }
    };
    Ok(exporter)
}

/// What every span says about the process: `service.name` (`OTEL_SERVICE_NAME`, else `nmo`),
/// `service.version`, the commit as `vcs.ref.head.revision`, and `OTEL_RESOURCE_ATTRIBUTES`.
pub fn resource() -> Resource {
    let mut resource = Resource::builder().with_attributes([
        KeyValue::new("service.version", build_info::VERSION),
        KeyValue::new("vcs.ref.head.revision", build_info::COMMIT),
    ]);
    if std::env::var("OTEL_SERVICE_NAME").is_err() {
        resource = resource.with_service_name(DEFAULT_SERVICE_NAME);
    }
    resource.build()
}

/// The OpenTelemetry layer nmo uses, over `provider`, with [`otel_filter`].
pub fn otel_layer<S>(provider: &SdkTracerProvider) -> impl Layer<S> + use<S>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("nmo"))
        .with_filter(otel_filter())
}

/// The ids of `span`'s OpenTelemetry span (None without the OpenTelemetry layer), for traces
/// that follow it to link to once it has ended.
pub fn trace_anchor(span: &tracing::Span) -> Option<TraceAnchor> {
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context.is_valid().then(|| TraceAnchor {
        trace_id: span_context.trace_id().to_string(),
        span_id: span_context.span_id().to_string(),
        sampled: span_context.is_sampled(),
    })
}

/// Links `span` (a new trace root) to the span `to` names.
pub fn link(span: &tracing::Span, to: &TraceAnchor) {
    let (Ok(trace_id), Ok(span_id)) = (
        TraceId::from_hex(&to.trace_id),
        SpanId::from_hex(&to.span_id),
    ) else {
        return;
    };
    let flags = if to.sampled {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    span.add_link(SpanContext::new(
        trace_id,
        span_id,
        flags,
        false,
        TraceState::default(),
    ));
}

/// Records the span's OpenTelemetry trace id in its `trace_id` field (declared empty by the
/// actors on each trace root), so log lines inside the span name their trace. Does nothing
/// without the OpenTelemetry layer.
pub fn record_trace_id(span: &tracing::Span) {
    let context = span.context();
    let trace_id = context.span().span_context().trace_id();
    if trace_id != opentelemetry::trace::TraceId::INVALID {
        span.record("trace_id", tracing::field::display(trace_id));
    }
}

/// Which spans go to OpenTelemetry: nmo's own at INFO and above. ractor wraps every actor's whole
/// life in an INFO span `Actor`: kept, every timer tick would join one endless trace. The
/// actors' logs-only spans (a maintenance's context for log lines once its trace has ended)
/// stay out too.
pub fn otel_filter() -> Targets {
    Targets::new()
        .with_default(Level::INFO)
        .with_target("ractor", Level::WARN)
        .with_target(LOGS_ONLY_TARGET, LevelFilter::OFF)
}

/// The log line writer (unfiltered): each line names its enclosing spans with their fields, so
/// a line inside a maintenance carries the maintenance's `node` and `trace_id`.
/// Without colours: the writers callers pass are files, pipes and buffers.
pub fn log_layer<S, W>(format: LogFormat, writer: W) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    W: for<'writer> tracing_subscriber::fmt::MakeWriter<'writer> + Send + Sync + 'static,
{
    log_layer_with(format, writer, false)
}

/// [`log_layer`], with ANSI colours in text lines when `ansi` (JSON never has any).
pub fn log_layer_with<S, W>(
    format: LogFormat,
    writer: W,
    ansi: bool,
) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    W: for<'writer> tracing_subscriber::fmt::MakeWriter<'writer> + Send + Sync + 'static,
{
    log_layer_timed(format, writer, ansi, TimeEncoding::default())
}

/// [`log_layer_with`], JSON lines writing their time as `time` says.
pub fn log_layer_timed<S, W>(
    format: LogFormat,
    writer: W,
    ansi: bool,
    time: TimeEncoding,
) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    W: for<'writer> tracing_subscriber::fmt::MakeWriter<'writer> + Send + Sync + 'static,
{
    match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(ansi)
            .with_writer(writer)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .fmt_fields(JsonFields::new())
            .event_format(ZapJson { time })
            .with_ansi(false)
            .with_writer(writer)
            .boxed(),
    }
}

/// Whether log lines on standard output may be coloured: it is a terminal and `NO_COLOR`
/// (no-color.org) is not set.
pub fn stdout_wants_colour() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Installs the global subscriber: logs filtered by `RUST_LOG` (by `default_filter`, e.g. `info`,
/// when it is unset or unusable), and spans exported over OTLP when configured.
pub fn init(format: LogFormat, default_filter: &str) -> Result<Telemetry, TelemetryError> {
    init_with(&LogSettings {
        format,
        default_filter: default_filter.to_string(),
        forced_filter: None,
        time_encoding: TimeEncoding::default(),
    })
}

/// Installs the global subscriber for `settings` (see [`init`]).
pub fn init_with(settings: &LogSettings) -> Result<Telemetry, TelemetryError> {
    let exporting = OtlpSettings::from_env()?;
    // Without an endpoint, a provider without exporter: trace ids for the logs, nothing sent.
    let provider = match &exporting {
        Some(otlp) => tracer_provider_for(otlp)?,
        None => SdkTracerProvider::builder().build(),
    };
    let otel_layer = otel_layer(&provider);
    let log_filter = match &settings.forced_filter {
        Some(forced) => EnvFilter::new(forced),
        None => EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new(&settings.default_filter)),
    };
    let log_layer = log_layer_timed(
        settings.format,
        std::io::stdout,
        stdout_wants_colour(),
        settings.time_encoding,
    )
    .with_filter(log_filter);
    Registry::default()
        .with(otel_layer)
        .with(log_layer)
        .try_init()?;
    Ok(Telemetry {
        provider,
        exporting,
    })
}

impl Telemetry {
    /// Where traces go, for the start-up line: `off` or `otlp <protocol>`.
    pub fn describe(&self) -> String {
        match &self.exporting {
            None => "off (no OTEL_EXPORTER_OTLP_ENDPOINT)".to_string(),
            Some(otlp) => format!("otlp {}", otlp.protocol.as_str()),
        }
    }

    /// Exports what is still buffered and stops the exporter. The SDK blocks while flushing, so
    /// it runs on a blocking thread, never on the runtime's workers.
    pub async fn shutdown(self) {
        let provider = self.provider;
        let flushed =
            tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(FLUSH_TIMEOUT))
                .await;
        match flushed {
            Ok(Ok(())) => {}
            Ok(Err(error)) => eprintln!("nmo: exporting the last spans failed: {error}"),
            Err(error) => eprintln!("nmo: the span flush task failed: {error}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_exported_without_an_endpoint() {
        // The test environment sets no OTEL_EXPORTER_OTLP_* variable; if it does, this test
        // has nothing to say.
        if !otlp_configured() {
            assert!(matches!(tracer_provider(), Ok(None)));
        }
    }

    #[test]
    fn the_traces_protocol_wins_and_unknown_protocols_are_refused() {
        use OtlpProtocol::{Grpc, HttpProtobuf};
        assert_eq!(OtlpProtocol::choose(None, None).unwrap(), Grpc);
        assert_eq!(OtlpProtocol::choose(None, Some("grpc")).unwrap(), Grpc);
        assert_eq!(
            OtlpProtocol::choose(None, Some("http/protobuf")).unwrap(),
            HttpProtobuf
        );
        assert_eq!(
            OtlpProtocol::choose(Some("http/protobuf"), Some("grpc")).unwrap(),
            HttpProtobuf
        );
        assert_eq!(OtlpProtocol::choose(Some(" "), Some("grpc")).unwrap(), Grpc);
        let error = OtlpProtocol::choose(None, Some("http/json")).unwrap_err();
        assert!(error.to_string().contains("http/json"), "{error}");
        assert!(error.to_string().contains("http/protobuf"), "{error}");
    }

    #[test]
    fn the_resource_names_service_and_version() {
        let resource = resource();
        let get = |key: &'static str| {
            resource
                .get(&opentelemetry::Key::from_static_str(key))
                .map(|value| value.to_string())
        };
        assert_eq!(get("service.version").as_deref(), Some(build_info::VERSION));
        assert_eq!(
            get("vcs.ref.head.revision").as_deref(),
            Some(build_info::COMMIT)
        );
        if std::env::var("OTEL_SERVICE_NAME").is_err() {
            assert_eq!(get("service.name").as_deref(), Some("nmo"));
        }
    }

    #[test]
    fn ractor_actor_spans_stay_out_of_traces() {
        let filter = otel_filter();
        assert!(!filter.would_enable("ractor::actor", &Level::INFO));
        assert!(filter.would_enable("ractor::actor", &Level::WARN));
        assert!(filter.would_enable("nmo_actors::node", &Level::INFO));
        assert!(!filter.would_enable("nmo_actors::node", &Level::DEBUG));
        assert!(!filter.would_enable(LOGS_ONLY_TARGET, &Level::ERROR));
    }
}

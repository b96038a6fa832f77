//! Logs and traces: a `tracing` subscriber that writes logs (text or JSON, filtered by
//! `RUST_LOG`) and, when an OTLP endpoint is configured through the standard OpenTelemetry
//! environment variables, exports spans over OTLP/gRPC (Jaeger receives it natively on 4317).
//!
//! The OpenTelemetry layer is installed even when nothing is exported: it gives every
//! maintenance a trace id, which its log lines carry (`trace_id` on the trace root's span).

use std::time::Duration;

use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_otlp::SpanExporter;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Level;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::filter::{EnvFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};

/// The service name traces carry when `OTEL_SERVICE_NAME` does not say otherwise.
const DEFAULT_SERVICE_NAME: &str = "nmo";
/// How long shutdown waits for the last spans to reach the collector.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human readable lines.
    Text,
    /// One JSON object per line, with the fields of every enclosing span.
    Json,
}

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The OTLP exporter could not be built from the environment.
    #[error("cannot build the OTLP exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// A global subscriber was already installed.
    #[error("cannot install the tracing subscriber: {0}")]
    Subscriber(#[from] tracing_subscriber::util::TryInitError),
}

/// The installed telemetry; call [`Telemetry::shutdown`] before exiting so the last spans are
/// exported.
pub struct Telemetry {
    provider: SdkTracerProvider,
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
    if !otlp_configured() {
        return Ok(None);
    }
    // The exporter reads the endpoint, headers, timeout and compression from OTEL_EXPORTER_OTLP_*.
    let exporter = SpanExporter::builder().with_tonic().build()?;
    let mut resource = Resource::builder();
    if std::env::var("OTEL_SERVICE_NAME").is_err() {
        resource = resource.with_service_name(DEFAULT_SERVICE_NAME);
    }
    // The sampler comes from OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG (the SDK's default
    // configuration reads them).
    let provider = SdkTracerProvider::builder()
        .with_resource(resource.build())
        .with_batch_exporter(exporter)
        .build();
    Ok(Some(provider))
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
/// life in an INFO span `Actor`: kept, every timer tick would join one endless trace.
pub fn otel_filter() -> Targets {
    Targets::new()
        .with_default(Level::INFO)
        .with_target("ractor", Level::WARN)
}

/// The log line writer (unfiltered): each line names its enclosing spans with their fields, so
/// a line inside a maintenance carries the maintenance's `node` and `trace_id`.
pub fn log_layer<S, W>(format: LogFormat, writer: W) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    W: for<'writer> tracing_subscriber::fmt::MakeWriter<'writer> + Send + Sync + 'static,
{
    match format {
        LogFormat::Text => tracing_subscriber::fmt::layer().with_writer(writer).boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .with_writer(writer)
            .boxed(),
    }
}

/// Installs the global subscriber: logs filtered by `RUST_LOG` (by `default_filter`, e.g. `info`,
/// when it is unset or unusable), and spans exported over OTLP when configured.
pub fn init(format: LogFormat, default_filter: &str) -> Result<Telemetry, TelemetryError> {
    // Without an endpoint, a provider without exporter: trace ids for the logs, nothing sent.
    let provider = tracer_provider()?.unwrap_or_else(|| SdkTracerProvider::builder().build());
    let otel_layer = otel_layer(&provider);
    let log_filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let log_layer = log_layer(format, std::io::stdout).with_filter(log_filter);
    Registry::default()
        .with(otel_layer)
        .with(log_layer)
        .try_init()?;
    Ok(Telemetry { provider })
}

impl Telemetry {
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
    fn ractor_actor_spans_stay_out_of_traces() {
        let filter = otel_filter();
        assert!(!filter.would_enable("ractor::actor", &Level::INFO));
        assert!(filter.would_enable("ractor::actor", &Level::WARN));
        assert!(filter.would_enable("nmo_actors::node", &Level::INFO));
        assert!(!filter.would_enable("nmo_actors::node", &Level::DEBUG));
    }
}

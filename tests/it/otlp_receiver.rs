//! An in-process OTLP/gRPC trace receiver: what an OpenTelemetry collector or Jaeger would
//! receive on port 4317, decoded into flat spans the telemetry tests can assert on.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;

/// One received span, ids in lower-case hex (as Jaeger shows them).
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a trace root.
    pub parent_span_id: String,
    pub attributes: BTreeMap<String, String>,
    /// (trace id, span id) of each link.
    pub links: Vec<(String, String)>,
    /// Names of the span's events (log lines inside it).
    pub events: Vec<String>,
    /// The service name of the resource that sent it.
    pub service: String,
}

impl ReceivedSpan {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

fn text(value: &Option<AnyValue>) -> String {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, String> {
    list.iter()
        .map(|kv| (kv.key.clone(), text(&kv.value)))
        .collect()
}

fn flatten(span: &Span, service: &str) -> ReceivedSpan {
    ReceivedSpan {
        name: span.name.clone(),
        trace_id: hex(&span.trace_id),
        span_id: hex(&span.span_id),
        parent_span_id: hex(&span.parent_span_id),
        attributes: attributes(&span.attributes),
        links: span
            .links
            .iter()
            .map(|l| (hex(&l.trace_id), hex(&l.span_id)))
            .collect(),
        events: span.events.iter().map(|e| e.name.clone()).collect(),
        service: service.to_string(),
    }
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut received = Vec::new();
        for resource_spans in request.into_inner().resource_spans {
            let service = resource_spans
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
                .map(|kv| text(&kv.value))
                .unwrap_or_default();
            for scope in resource_spans.scope_spans {
                received.extend(scope.spans.iter().map(|s| flatten(s, &service)));
            }
        }
        self.spans
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(received);
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// A running receiver.
pub struct Receiver {
    pub address: SocketAddr,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    server: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// Starts a receiver on a free local port.
    pub async fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let collector = Collector::default();
        let spans = collector.spans.clone();
        let server = tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(collector))
                .serve_with_incoming(TcpListenerStream::new(listener))
                .await
                .unwrap();
        });
        Receiver {
            address,
            spans,
            server,
        }
    }

    /// The endpoint to give an OTLP exporter.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

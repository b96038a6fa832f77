//! An in-process OTLP trace receiver: what an OpenTelemetry collector or Jaeger would receive
//! over gRPC on port 4317 and over HTTP with protobuf on 4318 (`POST /v1/traces`), decoded into
//! flat spans the telemetry tests can assert on.

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
    /// The resource's `service.version`.
    pub version: String,
    /// Over which transport it came: `grpc` or `http/protobuf`.
    pub transport: &'static str,
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

fn flatten(span: &Span, resource: &Resource, transport: &'static str) -> ReceivedSpan {
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
        service: resource.service.clone(),
        version: resource.version.clone(),
        transport,
    }
}

/// What the spans' resource says about the sender.
#[derive(Default)]
struct Resource {
    service: String,
    version: String,
}

impl Collector {
    /// Keeps the spans of one export request.
    fn receive(&self, request: ExportTraceServiceRequest, transport: &'static str) {
        let mut received = Vec::new();
        for resource_spans in request.resource_spans {
            let attribute = |key: &str| {
                resource_spans
                    .resource
                    .as_ref()
                    .and_then(|r| r.attributes.iter().find(|kv| kv.key == key))
                    .map(|kv| text(&kv.value))
                    .unwrap_or_default()
            };
            let resource = Resource {
                service: attribute("service.name"),
                version: attribute("service.version"),
            };
            for scope in resource_spans.scope_spans {
                received.extend(scope.spans.iter().map(|s| flatten(s, &resource, transport)));
            }
        }
        self.spans
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(received);
    }
}

/// `POST /v1/traces` with a binary protobuf body, as OTLP/HTTP sends it.
async fn http_export(
    axum::extract::State(collector): axum::extract::State<Collector>,
    body: axum::body::Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    match <ExportTraceServiceRequest as prost::Message>::decode(body) {
        Ok(request) => {
            collector.receive(request, "http/protobuf");
            let response = ExportTraceServiceResponse {
                partial_success: None,
            };
            (
                [(axum::http::header::CONTENT_TYPE, "application/x-protobuf")],
                prost::Message::encode_to_vec(&response),
            )
                .into_response()
        }
        Err(error) => (axum::http::StatusCode::BAD_REQUEST, error.to_string()).into_response(),
    }
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.receive(request.into_inner(), "grpc");
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// A running receiver.
pub struct Receiver {
    pub address: SocketAddr,
    /// Where OTLP/HTTP is served.
    pub http_address: SocketAddr,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    server: tokio::task::JoinHandle<()>,
    http_server: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// Starts a receiver on a free local port.
    pub async fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let collector = Collector::default();
        let spans = collector.spans.clone();
        let http_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let http_address = http_listener.local_addr().unwrap();
        let router = axum::Router::new()
            .route("/v1/traces", axum::routing::post(http_export))
            .with_state(collector.clone());
        let http_server = tokio::spawn(async move {
            axum::serve(http_listener, router).await.unwrap();
        });
        let server = tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(collector))
                .serve_with_incoming(TcpListenerStream::new(listener))
                .await
                .unwrap();
        });
        Receiver {
            address,
            http_address,
            spans,
            server,
            http_server,
        }
    }

    /// The endpoint to give an OTLP/gRPC exporter.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The full URL to give an OTLP/HTTP exporter.
    pub fn http_endpoint(&self) -> String {
        format!("http://{}/v1/traces", self.http_address)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.abort();
        self.http_server.abort();
    }
}

//! The client against in-process servers: HTTP/2 over TLS when offered, HTTP/1.1 when not,
//! h2c when told, and never more streams on a connection than its budget.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, Version};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

use super::*;

/// The most streams the test server lets a connection have open.
const SERVER_STREAM_CAP: u32 = 4;

type TestBody = http_body_util::Either<
    Full<Bytes>,
    StreamBody<ReceiverStream<Result<Frame<Bytes>, Infallible>>>,
>;

/// A server answering `/watch` with a first line and then nothing until the test ends (what a
/// watch looks like on the wire) and anything else with `ok`.
struct TestServer {
    url: String,
    /// The certificate to trust, DER (TLS servers only).
    ca: Option<Vec<u8>>,
    /// Keeps the watch bodies open.
    _hold: watch::Sender<()>,
}

async fn serve(alpn: Option<&[&[u8]]>) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (hold, holder) = watch::channel(());
    let (tls, ca) = match alpn {
        Some(alpn) => {
            let key = rcgen::KeyPair::generate().unwrap();
            let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
            let cert = params.self_signed(&key).unwrap();
            let der = cert.der().to_vec();
            let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(der.clone())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .unwrap();
            config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
            (
                Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))),
                Some(der),
            )
        }
        None => (None, None),
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    tokio::spawn(async move {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http2()
            .max_concurrent_streams(Some(SERVER_STREAM_CAP));
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let holder = holder.clone();
            let service =
                hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                    let mut holder = holder.clone();
                    async move {
                        let body: TestBody = if request.uri().path() == "/watch" {
                            let (frames, receiver) = mpsc::channel(1);
                            frames
                                .send(Ok(Frame::data(Bytes::from_static(b"{}\n"))))
                                .await
                                .unwrap();
                            // The sender lives as long as the test holds the server: the body
                            // never ends.
                            tokio::spawn(async move {
                                let _ = holder.changed().await;
                                drop(frames);
                            });
                            http_body_util::Either::Right(StreamBody::new(ReceiverStream::new(
                                receiver,
                            )))
                        } else {
                            http_body_util::Either::Left(Full::new(Bytes::from_static(b"ok")))
                        };
                        Ok::<_, Infallible>(Response::new(body))
                    }
                });
            let builder = builder.clone();
            match &tls {
                Some(acceptor) => {
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        if let Ok(stream) = acceptor.accept(tcp).await {
                            let _ = builder
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        }
                    });
                }
                None => {
                    tokio::spawn(async move {
                        let _ = builder.serve_connection(TokioIo::new(tcp), service).await;
                    });
                }
            }
        }
    });
    TestServer {
        url: format!("{scheme}://localhost:{port}"),
        ca,
        _hold: hold,
    }
}

fn client_for(server: &TestServer, options: &ApiClientOptions) -> (kube::Client, ConnectionCount) {
    let mut config = kube::Config::new(server.url.parse().unwrap());
    if let Some(der) = &server.ca {
        config.root_cert = Some(vec![der.clone()]);
    }
    let connections = ConnectionCount::default();
    let client = client(&config, options, connections.clone()).unwrap();
    (client, connections)
}

/// Opens `n` watches at once and returns their responses (bodies open).
async fn watches(client: &kube::Client, n: usize) -> Vec<Response<kube::client::Body>> {
    let opened = (0..n).map(|_| {
        let request = Request::get("/watch")
            .body(kube::client::Body::empty())
            .unwrap();
        client.send(request)
    });
    futures::future::try_join_all(opened).await.unwrap()
}

async fn short(client: &kube::Client) -> (Version, Bytes) {
    let request = Request::get("/short")
        .body(kube::client::Body::empty())
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(10), client.send(request))
        .await
        .expect("a short request is answered while the watches run")
        .unwrap();
    let version = response.version();
    (
        version,
        response.into_body().collect().await.unwrap().to_bytes(),
    )
}

fn budget(streams: usize) -> ApiClientOptions {
    ApiClientOptions {
        max_streams_per_connection: streams,
        ..ApiClientOptions::default()
    }
}

#[tokio::test]
async fn over_tls_offering_h2_the_watches_share_connections_within_the_budget() {
    let server = serve(Some(&[b"h2", b"http/1.1"])).await;
    let (client, connections) = client_for(&server, &budget(3));
    let open = watches(&client, 7).await;
    assert!(open.iter().all(|r| r.version() == Version::HTTP_2));
    // 7 streams, at most 3 per connection: 3 connections.
    assert_eq!(connections.open(), 3, "opened {}", connections.opened());
    // Each connection is below the server's cap of 4: a call still gets a stream at once.
    assert_eq!(
        short(&client).await,
        (Version::HTTP_2, Bytes::from_static(b"ok"))
    );
    drop(open);
    // Streams given back: the calls fit on the connections already open.
    for _ in 0..5 {
        short(&client).await;
    }
    assert_eq!(connections.open(), 3);
}

#[tokio::test]
async fn over_tls_a_burst_of_requests_opens_no_connection_it_does_not_keep() {
    // Before ALPN has picked HTTP/2, hyper cannot know the requests of a burst could share the
    // first connection: without the lane's first request going alone, each opened its own.
    let server = serve(Some(&[b"h2", b"http/1.1"])).await;
    let (client, connections) = client_for(&server, &budget(3));
    let open = watches(&client, 7).await;
    assert!(open.iter().all(|r| r.version() == Version::HTTP_2));
    assert_eq!(connections.opened(), 3);
    drop(open);
}

#[tokio::test]
async fn over_tls_offering_only_http1_each_request_in_flight_has_its_connection() {
    let server = serve(Some(&[b"http/1.1"])).await;
    let (client, connections) = client_for(&server, &ApiClientOptions::default());
    let open = watches(&client, 3).await;
    assert!(open.iter().all(|r| r.version() == Version::HTTP_11));
    assert_eq!(connections.open(), 3);
    assert_eq!(short(&client).await.0, Version::HTTP_11);
    assert_eq!(connections.opened(), 4);
}

#[tokio::test]
async fn plain_http_is_http1_unless_told_the_server_speaks_h2c() {
    let server = serve(None).await;
    let (client, _) = client_for(&server, &ApiClientOptions::default());
    assert_eq!(short(&client).await.0, Version::HTTP_11);

    let h2c = ApiClientOptions {
        http2_prior_knowledge: true,
        ..ApiClientOptions::default()
    };
    let (client, connections) = client_for(&server, &h2c);
    let open = watches(&client, 3).await;
    assert!(open.iter().all(|r| r.version() == Version::HTTP_2));
    assert_eq!(short(&client).await.0, Version::HTTP_2);
    assert_eq!(connections.opened(), 1);
}

#[test]
fn a_proxy_is_refused_rather_than_ignored() {
    let mut config = kube::Config::new("https://localhost:6443".parse().unwrap());
    config.proxy_url = Some("http://proxy:3128".parse().unwrap());
    let built = client(
        &config,
        &ApiClientOptions::default(),
        ConnectionCount::default(),
    );
    assert!(matches!(built, Err(ApiClientError::Proxy(_))));
}

/// Why the lanes exist: hyper keeps one HTTP/2 connection per host and a request past the
/// server's stream cap waits for a stream to close, which a watch never does. If hyper ever
/// opens another connection by itself, this fails and the lanes may go.
#[tokio::test]
async fn past_the_servers_stream_cap_a_request_waits_behind_the_watches() {
    let server = serve(Some(&[b"h2", b"http/1.1"])).await;
    let (client, _) = client_for(&server, &budget(10));
    let _open = watches(&client, SERVER_STREAM_CAP as usize).await;
    let one_more = tokio::time::timeout(Duration::from_secs(1), watches(&client, 1)).await;
    assert!(one_more.is_err(), "answered past the server's stream cap");
}

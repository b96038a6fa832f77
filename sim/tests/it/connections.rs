//! The server speaks HTTP/1.1 and HTTP/2 without TLS (h2c) on one port, and counts the
//! connections each client used.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use nmo_sim::Query;

use crate::support::start_plain;

async fn get(
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>,
    url: &str,
    agent: &str,
) -> (http::Version, u16) {
    let request = http::Request::get(url)
        .header(http::header::USER_AGENT, agent)
        .body(Empty::new())
        .unwrap();
    let response = client.request(request).await.unwrap();
    let version = response.version();
    let status = response.status().as_u16();
    response.into_body().collect().await.unwrap();
    (version, status)
}

#[tokio::test]
async fn h2c_requests_share_a_connection_and_http1_ones_are_counted_apart() {
    let sim = start_plain(2, 1).await;
    let url = format!("{}/api/v1/nodes", sim.base_url());
    let h2c = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let requests = (0..5).map(|_| get(&h2c, &url, "multiplexed"));
    for (version, status) in futures::future::join_all(requests).await {
        assert_eq!((version, status), (http::Version::HTTP_2, 200));
    }
    // Fresh clients: each opens its own HTTP/1.1 connection.
    for _ in 0..3 {
        let http1 = Client::builder(TokioExecutor::new()).build_http();
        assert_eq!(
            get(&http1, &url, "one-by-one").await,
            (http::Version::HTTP_11, 200)
        );
    }
    assert_eq!(sim.requests(&Query::all().user_agent("multiplexed")), 5);
    assert_eq!(sim.connections(&Query::all().user_agent("multiplexed")), 1);
    assert_eq!(sim.connections(&Query::all().user_agent("one-by-one")), 3);
    sim.shutdown().await;
}

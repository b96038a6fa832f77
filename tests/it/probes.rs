//! `/healthz` answers as soon as the server runs; `/readyz` only once the replica is ready.

use nmo::observability::endpoints::{Readiness, probes_router};
use tokio::net::TcpListener;

use crate::obs_support::http_get;

#[tokio::test]
async fn readyz_fails_until_ready_and_healthz_always_answers() {
    let readiness = Readiness::default();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(nmo::observability::http::serve(
        listener,
        probes_router(readiness.clone()),
        false,
        async {
            let _ = stopped.await;
        },
    ));

    assert_eq!(http_get(address, "/healthz").await, (200, "ok".to_string()));
    let (status, _) = http_get(address, "/readyz").await;
    assert_eq!(status, 503, "not ready before the watch has listed");
    readiness.set_ready();
    assert_eq!(http_get(address, "/readyz").await, (200, "ok".to_string()));
    assert_eq!(http_get(address, "/healthz").await.0, 200);
    assert_eq!(http_get(address, "/nope").await.0, 404);

    let _ = stop.send(());
    server.await.unwrap();
}

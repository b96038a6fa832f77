//! `/healthz` answers as soon as the server runs; `/readyz` only once the replica is ready.
//! Both say why.

use nmo::cluster::watch_health::WatchHealth;
use nmo::observability::endpoints::probes_router;
use nmo::observability::health::{Liveness, Readiness};
use tokio::net::TcpListener;

use crate::obs_support::http_get;

#[tokio::test]
async fn readyz_fails_until_ready_and_healthz_always_answers() {
    let readiness = Readiness::default();
    let watches = WatchHealth::default();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(nmo::observability::http::serve(
        listener,
        probes_router(readiness.clone(), Liveness::default()),
        false,
        async {
            let _ = stopped.await;
        },
    ));

    let (status, body) = http_get(address, "/healthz").await;
    assert_eq!(
        (status, body.as_str()),
        (200, "ok: no supervisor runs on this replica")
    );
    assert_eq!(
        http_get(address, "/readyz").await,
        (503, "not ready: starting".to_string())
    );
    readiness.leading(watches.clone());
    let _nodes = watches.register("Nodes");
    assert_eq!(
        http_get(address, "/readyz").await,
        (
            503,
            "not ready: the NodeMaintenance watch has not listed yet".to_string()
        )
    );
    readiness.listed();
    assert_eq!(
        http_get(address, "/readyz").await,
        (200, "ok: leading, 0 of 1 watches established".to_string())
    );
    assert_eq!(http_get(address, "/healthz").await.0, 200);
    assert_eq!(http_get(address, "/nope").await.0, 404);

    let _ = stop.send(());
    server.await.unwrap();
}

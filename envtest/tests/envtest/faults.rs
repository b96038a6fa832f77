//! Faults of the control plane's processes: the API server killed, terminated and restarted on
//! its port with its data intact, etcd paused and resumed, a controller restarted. A control
//! plane of its own: these tests take components away from everyone using it.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use nmo_envtest::{Component, ControlPlane, Error, Options};

use crate::support::{component_of, scratch_dir};

/// A request that must fail fast while the API server is down, or hang while etcd is paused.
const QUICK: Duration = Duration::from_secs(3);

async fn get(api: &Api<ConfigMap>, name: &str) -> Result<Option<ConfigMap>, String> {
    match tokio::time::timeout(QUICK, api.get_opt(name)).await {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!("no answer within {QUICK:?}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_dies_comes_back_on_its_port_and_etcd_can_be_frozen() {
    let control_plane = ControlPlane::start(Options {
        base_dir: Some(scratch_dir("faults")),
        ..Options::api_only()
    })
    .expect("a control plane");
    let client = control_plane.admin_client().expect("a client");
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut object = ConfigMap::default();
    object.metadata.name = Some("kept".into());
    api.create(&PostParams::default(), &object)
        .await
        .expect("created");
    let port = |control_plane: &ControlPlane| {
        component_of(control_plane, Component::ApiServer).map(|c| c.port)
    };
    let before = port(&control_plane);

    // Killed: nothing answers, and it cannot be restarted twice over.
    control_plane.kill(Component::ApiServer).expect("killed");
    assert!(
        get(&api, "kept").await.is_err(),
        "a dead API server answered"
    );
    assert!(control_plane.check_alive().is_err(), "the kill is reported");
    assert!(matches!(
        control_plane.kill(Component::ApiServer),
        Err(Error::Fault { .. })
    ));

    // Restarted on its port with etcd's data: the same client carries on.
    control_plane
        .restart(Component::ApiServer)
        .expect("restarted");
    assert_eq!(port(&control_plane), before);
    assert!(get(&api, "kept").await.expect("answers").is_some());
    control_plane.check_alive().expect("everything runs");
    assert!(
        matches!(
            control_plane.restart(Component::ApiServer),
            Err(Error::Fault { .. })
        ),
        "a running API server is not restarted"
    );

    // A graceful stop ends too, and comes back the same way.
    control_plane
        .terminate(Component::ApiServer)
        .expect("terminated");
    assert!(get(&api, "kept").await.is_err());
    control_plane
        .restart(Component::ApiServer)
        .expect("restarted");
    assert!(get(&api, "kept").await.expect("answers").is_some());

    // etcd frozen: the API server is up but cannot read; thawed, it answers again.
    control_plane.pause(Component::Etcd).expect("paused");
    let frozen = get(&api, "kept").await;
    control_plane.resume(Component::Etcd).expect("resumed");
    assert!(frozen.is_err(), "a read with etcd frozen: {frozen:?}");
    let mut answered = Err(String::new());
    for _ in 0..20 {
        answered = get(&api, "kept").await;
        if answered.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(answered.expect("answers after the thaw").is_some());
    assert!(matches!(
        control_plane.restart(Component::Etcd),
        Err(Error::Fault { .. })
    ));
}

/// A killed scheduler comes back as a process of its own, on fresh ports, healthy. (Its own
/// control plane: with a scheduler's watches open, a graceful API server stop above would wait
/// a minute for them.)
#[test]
fn a_killed_controller_comes_back_on_fresh_ports() {
    let control_plane = ControlPlane::start(Options {
        base_dir: Some(scratch_dir("faults-controller")),
        scheduler: true,
        ..Options::api_only()
    })
    .expect("a control plane");
    let scheduler = |control_plane: &ControlPlane| {
        component_of(control_plane, Component::Scheduler).map(|c| c.pid)
    };
    let before = scheduler(&control_plane);
    assert!(matches!(
        control_plane.restart(Component::Scheduler),
        Err(Error::Fault { .. })
    ));
    control_plane.kill(Component::Scheduler).expect("killed");
    control_plane
        .restart(Component::Scheduler)
        .expect("restarted");
    assert_ne!(scheduler(&control_plane), before);
    control_plane.check_alive().expect("everything runs");
}

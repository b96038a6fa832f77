//! Starting fails fast and says why: a missing binary names itself and how to get it, a taken
//! port names the port; and a failed start leaves nothing behind.

use std::sync::mpsc;
use std::time::Duration;

use nmo_envtest::{Component, ControlPlane, Error, Options};

use crate::support::scratch_dir;

/// Starts with `options` on another thread; a start that hangs fails the test.
fn start_expecting_an_error(options: Options) -> Error {
    let (done, outcome) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(ControlPlane::start(options).map(|_| ()));
    });
    match outcome.recv_timeout(Duration::from_secs(120)) {
        Ok(Err(error)) => error,
        Ok(Ok(())) => panic!("the control plane started"),
        Err(_) => panic!("no answer within 120 s: the start hangs"),
    }
}

#[test]
fn a_missing_binary_is_named_with_how_to_get_it() {
    let assets = scratch_dir("assets-without-apiserver");
    let etcd = nmo_envtest::assets_dir(None)
        .expect("the real assets")
        .join("etcd");
    std::os::unix::fs::symlink(etcd, assets.join("etcd")).unwrap();
    let base = scratch_dir("missing-binary-runs");
    let error = start_expecting_an_error(Options {
        assets: Some(assets.clone()),
        base_dir: Some(base.clone()),
        ..Options::api_only()
    });
    let message = error.to_string();
    assert!(
        matches!(
            error,
            Error::MissingBinary {
                binary: "kube-apiserver",
                ..
            }
        ),
        "{message}"
    );
    assert!(message.contains(&assets.display().to_string()), "{message}");
    assert!(
        message.contains("export KUBEBUILDER_ASSETS=$(../shared/k8s/assets)"),
        "{message}"
    );
    // Checked before anything starts: not even a run directory.
    assert_eq!(
        std::fs::read_dir(&base).map(|dir| dir.count()).unwrap_or(0),
        0
    );
    std::fs::remove_dir_all(&assets).unwrap();
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn a_taken_port_is_named_and_the_failed_start_cleans_up() {
    let taken = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = taken.local_addr().unwrap().port();
    let base = scratch_dir("taken-port-runs");
    let error = start_expecting_an_error(Options {
        apiserver_port: Some(port),
        base_dir: Some(base.clone()),
        ..Options::api_only()
    });
    assert!(
        matches!(error, Error::PortInUse { component: Component::ApiServer, port: p } if p == port),
        "{error}"
    );
    assert!(error.to_string().contains(&port.to_string()), "{error}");
    // etcd had started: it is gone with its run directory.
    let left: Vec<_> = std::fs::read_dir(&base)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    std::fs::remove_dir_all(&base).unwrap();
}

/// A component that loses a port to another process between the pick and its bind is
/// restarted on fresh ports. The race is staged: an `etcd` that fails as a lost bind does the
/// first time, then runs the real one.
#[test]
fn a_component_that_loses_its_port_is_restarted_on_fresh_ones() {
    let real = nmo_envtest::assets_dir(None).expect("the real assets");
    let assets = scratch_dir("assets-port-race");
    let marker = assets.join("lost-once");
    let script = format!(
        "#!/bin/sh\n\
         if [ ! -e '{marker}' ]; then\n\
           : > '{marker}'\n\
           echo 'listen tcp 127.0.0.1:2379: bind: address already in use' >&2\n\
           exit 1\n\
         fi\n\
         exec '{etcd}' \"$@\"\n",
        marker = marker.display(),
        etcd = real.join("etcd").display()
    );
    let etcd = assets.join("etcd");
    std::fs::write(&etcd, script).unwrap();
    std::fs::set_permissions(&etcd, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(real.join("kube-apiserver"), assets.join("kube-apiserver")).unwrap();

    let control_plane = ControlPlane::start(Options {
        assets: Some(assets.clone()),
        ..Options::api_only()
    })
    .expect("started after the lost port");
    assert!(marker.exists(), "the staged race did not happen");
    let etcd_log = control_plane
        .components()
        .into_iter()
        .find(|component| component.component == Component::Etcd)
        .map(|component| std::fs::read_to_string(component.log).unwrap())
        .unwrap();
    assert!(etcd_log.contains("address already in use"), "{etcd_log}");
    drop(control_plane);
    std::fs::remove_dir_all(&assets).unwrap();
}

//! Writes whose late arrival could undo someone else's are conditional on what their writer
//! last saw, as the API server itself enforces it: a status write on the status's revision
//! (and the object's uid), a node patch on the node's resourceVersion.

use nmo::cluster::KubeCluster;
use nmo_actors::model::{
    MaintenanceName, MaintenanceStatus, NodeName, Phase, StatusPrecondition, Uid,
};
use nmo_actors::ports::{Cluster, ClusterError};
use serde_json::json;

use crate::support::{Backend, TestEnv, both_backends};

fn running(progress: i32) -> MaintenanceStatus {
    MaintenanceStatus {
        phase: Some(Phase::Running),
        drain_progress: progress,
        ..MaintenanceStatus::default()
    }
}

/// The status subresource takes a write only over the status its writer saw: no status at all,
/// or the revision it last read; a stale revision, or another object of the same name, is a
/// conflict that changes nothing. A status without a revision (the Go operator's) is written
/// over once.
async fn a_status_write_lands_only_over_the_status_its_writer_saw(backend: Backend) {
    let env = TestEnv::on(backend).budgeted_nodes(1, 0).start_idle().await;
    env.create_maintenance("nm-0", "node-0").await;
    let name = MaintenanceName::from(env.name("nm-0"));
    let uid = env.maintenance("nm-0").await.expect("exists")["metadata"]["uid"]
        .as_str()
        .expect("a uid")
        .into();
    let cluster = KubeCluster::new(env.operator_client(), None);
    let write = async |uid: &Uid, seen, status: &MaintenanceStatus| {
        cluster.write_status(&name, uid, seen, status).await
    };
    let conflict =
        |result: Result<(), ClusterError>| matches!(result, Err(ClusterError::Conflict(_)));

    write(&uid, StatusPrecondition::Absent, &running(10))
        .await
        .expect("the first status");
    assert_eq!(env.status("nm-0").await["statusRevision"], 1);
    assert!(conflict(
        write(&uid, StatusPrecondition::Absent, &running(20)).await
    ));
    write(&uid, StatusPrecondition::Revision(Some(1)), &running(30))
        .await
        .expect("over revision 1");
    assert!(
        conflict(write(&uid, StatusPrecondition::Revision(Some(1)), &running(40)).await),
        "a write over revision 1 arriving after revision 2 is refused"
    );
    assert!(
        conflict(
            write(
                &"another-uid".into(),
                StatusPrecondition::Revision(Some(2)),
                &running(50)
            )
            .await
        ),
        "another object of that name is not written"
    );
    let status = env.status("nm-0").await;
    assert_eq!(status["drainProgress"], 30, "{status}");
    assert_eq!(status["statusRevision"], 2, "{status}");

    // The Go operator writes the status without a revision (it replaces the whole status).
    let go_status = json!({"status": {"phase": "Running", "drainProgress": 60}});
    let api: kube::Api<nmo::crd::NodeMaintenance> = kube::Api::all(env.admin_client());
    let mut object = api.get(&name).await.expect("exists");
    object.status = serde_json::from_value(go_status["status"].clone()).expect("a status");
    api.replace_status(&name, &Default::default(), &object)
        .await
        .expect("the Go operator's status");
    assert!(conflict(
        write(&uid, StatusPrecondition::Revision(Some(2)), &running(70)).await
    ));
    write(&uid, StatusPrecondition::Revision(None), &running(80))
        .await
        .expect("over the Go operator's status");
    let status = env.status("nm-0").await;
    assert_eq!(status["drainProgress"], 80, "{status}");
    assert_eq!(status["statusRevision"], 1, "{status}");
}

/// A node patch computed from a read of the node fails once the node changed since, even where
/// what it tests of the taints still holds: a cordon that arrives late never lands on a node
/// changed meanwhile (undone, say). Read again, it lands.
async fn a_node_patch_lands_only_on_the_node_its_writer_read(backend: Backend) {
    let env = TestEnv::on(backend).budgeted_nodes(1, 0).start_idle().await;
    let node = NodeName::from(env.name("node-0"));
    let cluster = KubeCluster::new(env.operator_client(), None);
    let read = cluster
        .get_node(&node)
        .await
        .expect("a read")
        .expect("the node");
    let cordon = |read: &nmo_actors::model::NodeState| {
        nmo_actors::decisions::maintenance_patch(read, &"uid-nm-0".into(), None, chrono::Utc::now())
            .expect("a patch")
    };
    let stale = cordon(&read);
    // Someone changes the node (not its taints) after it was read.
    env.patch_node(
        "node-0",
        json!({"metadata": {"labels": {"team": "storage"}}}),
    )
    .await;
    let refused = cluster.patch_node(&stale).await;
    assert!(
        matches!(refused, Err(ClusterError::Conflict(_))),
        "{refused:?}"
    );
    assert_ne!(env.node("node-0").await["spec"]["unschedulable"], true);
    // On the real control plane the controllers may still be settling the new node (the TTL
    // controller's annotation, the lifecycle controller's taints): a write of theirs between
    // the read and the patch is exactly what the precondition refuses, so read again, as nmo
    // does, a few times.
    let mut written = None;
    for _ in 0..5 {
        let fresh = cluster
            .get_node(&node)
            .await
            .expect("a read")
            .expect("the node");
        match cluster.patch_node(&cordon(&fresh)).await {
            Ok(node) => {
                written = Some(node);
                break;
            }
            Err(ClusterError::Conflict(_)) => continue,
            Err(other) => panic!("the patch over a fresh read failed: {other:?}"),
        }
    }
    let written = written.expect("a patch over a fresh read lands");
    assert!(written.unschedulable);
    assert_eq!(
        env.node("node-0").await["metadata"]["labels"]["team"],
        "storage"
    );
}

both_backends!(
    a_status_write_lands_only_over_the_status_its_writer_saw,
    a_node_patch_lands_only_on_the_node_its_writer_read,
);

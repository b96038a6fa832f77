//! The kubelet stand-in for other API servers (`kubelet::remote`), driven here against the
//! simulator with its own kubelet off: it must do what the in-process kubelet does, through the
//! API alone, for its nodes only.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use nmo_envtest::testing::eventually;
use nmo_sim::kubelet::remote::{NodeSet, RemoteKubelet};
use nmo_sim::{Scenario, SimConfig, Simulator, Timing};
use serde_json::json;

fn pod(name: &str, node: &str, grace: i64) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "workloads"},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": grace,
                 "containers": [{"name": "main", "image": "registry.invalid/app:1"}]}
    }))
    .unwrap()
}

async fn phase(pods: &Api<Pod>, name: &str) -> Option<String> {
    pods.get_opt(name)
        .await
        .unwrap()
        .and_then(|p| p.status.and_then(|s| s.phase))
}

#[tokio::test]
async fn pods_of_its_nodes_start_and_finish_after_their_grace_period() {
    let mut config = SimConfig::default().scenario(Scenario::plain(2, 0));
    config.kubelet = false;
    let sim = Simulator::start(config).await.unwrap();
    let client = sim.kube_client().unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "workloads");
    for (name, node) in [("mine", "node-0"), ("not-mine", "node-1")] {
        pods.create(&PostParams::default(), &pod(name, node, 2))
            .await
            .unwrap();
    }
    let timing = Timing {
        time_scale: 0.5,
        pod_startup: Duration::from_millis(200),
    };
    let kubelet = RemoteKubelet::spawn(client.clone(), timing, NodeSet::only(["node-0"]));

    eventually(
        "the pod of node-0 to run",
        Duration::from_secs(10),
        async || phase(&pods, "mine").await.as_deref() == Some("Running"),
    )
    .await;
    let running = pods.get("mine").await.unwrap();
    let status = running.status.unwrap();
    assert!(
        status
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );
    assert!(status.container_statuses.unwrap()[0].ready);
    assert!(status.pod_ip.is_some() && status.host_ip.is_some());
    // Another node's pod is not this kubelet's business (nor is there any other kubelet).
    assert_eq!(phase(&pods, "not-mine").await.as_deref(), Some("Pending"));

    // Deleted: it stays, terminating, for its grace period (2 s at half speed), then goes.
    let deleted = Instant::now();
    pods.delete("mine", &DeleteParams::default()).await.unwrap();
    assert!(pods.get_opt("mine").await.unwrap().is_some(), "terminating");
    eventually("the pod to finish", Duration::from_secs(10), async || {
        pods.get_opt("mine").await.unwrap().is_none()
    })
    .await;
    assert!(
        deleted.elapsed() >= Duration::from_millis(900),
        "finished after {:?}, before its (scaled) grace period",
        deleted.elapsed()
    );

    // A node added later is served too.
    kubelet.nodes().add("node-1");
    pods.create(&PostParams::default(), &pod("later", "node-1", 0))
        .await
        .unwrap();
    eventually(
        "a pod of the added node to run",
        Duration::from_secs(10),
        async || phase(&pods, "later").await.as_deref() == Some("Running"),
    )
    .await;
    kubelet.stop();
    sim.shutdown().await;
}

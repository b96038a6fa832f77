//! Events recorded through events.k8s.io/v1 (kube-runtime's Recorder, as nmo does) are the
//! same objects as core/v1 Events, as on a real server.

use k8s_openapi::api::core::v1::{Event as CoreEvent, ObjectReference};
use k8s_openapi::api::events::v1::Event as V1Event;
use kube::api::{Api, ListParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use nmo_sim::Scenario;

use crate::support::{Kubectl, start};

#[tokio::test]
async fn recorder_events_are_visible_through_both_apis_and_kubectl() {
    let sim = start(Some(Scenario::plain(1, 0)), 0.0).await;
    let client = sim.kube_client().unwrap();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "node-maintenance".into(),
            instance: Some("nmo-0".into()),
        },
    );
    let node = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some("node-0".into()),
        uid: sim.get_json("", "nodes", "", "node-0").unwrap()["metadata"]["uid"]
            .as_str()
            .map(String::from),
        ..Default::default()
    };
    let ev = Event {
        type_: EventType::Normal,
        reason: "UncordonNode".into(),
        note: Some("Uncordon node node-0".into()),
        action: "Uncordon".into(),
        secondary: None,
    };
    recorder.publish(&ev, &node).await.unwrap();
    // The same event again becomes a series (the Recorder patches it).
    recorder.publish(&ev, &node).await.unwrap();
    let v1: Api<V1Event> = Api::namespaced(client.clone(), "default");
    let list = v1
        .list(&ListParams::default().fields("regarding.name=node-0"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(
        list.items[0].reporting_controller.as_deref(),
        Some("node-maintenance")
    );
    assert!(
        list.items[0].series.is_some(),
        "the repeat is recorded as a series"
    );
    let core: Api<CoreEvent> = Api::namespaced(client, "default");
    let list = core
        .list(&ListParams::default().fields("involvedObject.name=node-0,reason=UncordonNode"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    let e = &list.items[0];
    assert_eq!(e.message.as_deref(), Some("Uncordon node node-0"));
    assert_eq!(e.involved_object.kind.as_deref(), Some("Node"));
    assert_eq!(e.reporting_component.as_deref(), Some("node-maintenance"));
    let Some(k) = Kubectl::new(&sim) else { return };
    let o = k.run(&["get", "events", "-n", "default"]).await;
    assert!(o.ok, "{o:?}");
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert!(lines[0].starts_with("LAST SEEN"), "{}", o.stdout);
    assert!(
        lines[1].contains("UncordonNode")
            && lines[1].contains("node/node-0")
            && lines[1].contains("Uncordon node node-0"),
        "{}",
        o.stdout
    );
    sim.shutdown().await;
}

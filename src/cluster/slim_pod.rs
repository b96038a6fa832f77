//! Pods as the drain reads them: only the fields of [`PodInfo`], decoded straight from the
//! API's JSON.
//!
//! Every pod watch event is a whole Pod: containers with their env, probes and resources,
//! volumes, status with container states, and `managedFields`, several KiB that k8s-openapi
//! decodes into nested allocations, and that the drain then reduces to a dozen fields. Decoding
//! a whole Pod was the largest part of nmo's CPU per drained node (a profile of `nmo bench`:
//! a third of it). Here serde skips what is not needed without allocating it, `metadata`
//! included (its `managedFields` and annotations are most of a small pod).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use nmo_actors::model::PodInfo;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use nmo_actors::model::MIRROR_ANNOTATION;

/// A Pod with only what the drain reads.
#[derive(Resource, Deserialize, Clone, Debug)]
#[resource(inherit = Pod)]
pub struct SlimPod {
    /// Name, namespace, uid, labels, owners, deletion, the mirror annotation (kube requires an
    /// `ObjectMeta`; only these fields of it are filled).
    #[serde(deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
    /// `spec`.
    #[serde(default)]
    pub spec: Option<SlimSpec>,
    /// `status`.
    #[serde(default)]
    pub status: Option<SlimStatus>,
}

/// `spec` of a [`SlimPod`].
#[derive(Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct SlimSpec {
    /// `terminationGracePeriodSeconds`.
    #[serde(default)]
    pub termination_grace_period_seconds: Option<i64>,
    /// The volumes, each only as "an emptyDir or not".
    #[serde(default)]
    pub volumes: Option<Vec<SlimVolume>>,
}

/// A volume of a [`SlimPod`].
#[derive(Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct SlimVolume {
    /// Present for an emptyDir volume (its settings are skipped).
    #[serde(default)]
    pub empty_dir: Option<IgnoredAny>,
}

/// `status` of a [`SlimPod`].
#[derive(Deserialize, Clone, Debug, Default)]
pub struct SlimStatus {
    /// `phase`.
    #[serde(default)]
    pub phase: Option<String>,
    /// `conditions`, type and status only.
    #[serde(default)]
    pub conditions: Option<Vec<SlimCondition>>,
}

/// A condition, type and status only (a Pod's, or a Node's in `slim_node`).
#[derive(Deserialize, Clone, Debug, Default)]
pub struct SlimCondition {
    /// E.g. `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
}

/// The metadata fields the drain reads.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct SlimMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    annotations: MirrorAnnotation,
    #[serde(default)]
    owner_references: Option<Vec<OwnerReference>>,
    #[serde(default)]
    deletion_timestamp: Option<Time>,
}

/// The annotations, of which only the mirror pod's is kept.
#[derive(Default)]
struct MirrorAnnotation(Option<String>);

impl<'de> Deserialize<'de> for MirrorAnnotation {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Keep;
        impl<'de> Visitor<'de> for Keep {
            type Value = MirrorAnnotation;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of annotations or null")
            }

            fn visit_unit<E>(self) -> Result<MirrorAnnotation, E> {
                Ok(MirrorAnnotation(None))
            }

            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<MirrorAnnotation, A::Error> {
                let mut mirror = None;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == MIRROR_ANNOTATION {
                        mirror = Some(map.next_value::<String>()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(MirrorAnnotation(mirror))
            }
        }
        deserializer.deserialize_any(Keep)
    }
}

fn slim_meta<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    let meta = SlimMeta::deserialize(deserializer)?;
    Ok(ObjectMeta {
        name: meta.name,
        namespace: meta.namespace,
        uid: meta.uid,
        resource_version: meta.resource_version,
        labels: meta.labels,
        annotations: meta
            .annotations
            .0
            .map(|value| BTreeMap::from([(MIRROR_ANNOTATION.to_string(), value)])),
        owner_references: meta.owner_references,
        deletion_timestamp: meta.deletion_timestamp,
        ..ObjectMeta::default()
    })
}

/// The drain's view of a pod, shared (see [`nmo_actors::model::PodList`]).
pub fn shared_pod_info(pod: &SlimPod) -> Arc<PodInfo> {
    Arc::new(pod_info(pod))
}

/// The drain's view of a pod.
pub fn pod_info(pod: &SlimPod) -> PodInfo {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    super::convert::pod_info_of(
        &pod.metadata,
        status.and_then(|s| s.phase.as_deref()),
        spec.and_then(|s| s.termination_grace_period_seconds),
        spec.and_then(|s| s.volumes.as_ref())
            .is_some_and(|volumes| volumes.iter().any(|v| v.empty_dir.is_some())),
        status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            }),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn pods() -> Vec<Value> {
        vec![
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "web-1", "namespace": "app", "uid": "u1", "resourceVersion": "7",
                    "labels": {"app": "web"},
                    "annotations": {
                        "kubectl.kubernetes.io/last-applied-configuration": "{\"big\": true}",
                        "kubernetes.io/config.mirror": "abc"
                    },
                    "ownerReferences": [
                        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "r", "controller": true},
                        {"apiVersion": "v1", "kind": "Other", "name": "x", "uid": "o"}
                    ],
                    "deletionTimestamp": "2026-01-01T00:00:00Z",
                    "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:metadata": {}}}]
                },
                "spec": {
                    "nodeName": "n1",
                    "terminationGracePeriodSeconds": 30,
                    "containers": [{"name": "c", "image": "i", "env": [{"name": "A", "value": "b"}]}],
                    "volumes": [
                        {"name": "token", "projected": {"sources": []}},
                        {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}
                    ]
                },
                "status": {
                    "phase": "Running",
                    "conditions": [
                        {"type": "PodScheduled", "status": "True"},
                        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
                    ],
                    "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0, "image": "i", "imageID": "", "state": {"running": {}}}]
                }
            }),
            json!({
                "metadata": {"name": "bare", "namespace": "app", "annotations": null},
                "spec": {"containers": [], "volumes": [{"name": "e", "emptyDir": {}}]},
                "status": {"phase": "Succeeded"}
            }),
            json!({"metadata": {"name": "minimal"}}),
        ]
    }

    #[test]
    fn a_slim_pod_says_what_a_whole_pod_says() {
        for pod in pods() {
            let slim: SlimPod = serde_json::from_value(pod.clone()).unwrap();
            let whole: Pod = serde_json::from_value(pod.clone()).unwrap();
            assert_eq!(
                pod_info(&slim),
                super::super::convert::pod_info(&whole),
                "{pod}"
            );
        }
    }

    #[test]
    fn only_the_mirror_annotation_is_kept() {
        let slim: SlimPod = serde_json::from_value(pods()[0].clone()).unwrap();
        let annotations = slim.metadata.annotations.clone().unwrap();
        assert_eq!(annotations.keys().collect::<Vec<_>>(), [MIRROR_ANNOTATION]);
        assert!(slim.metadata.managed_fields.is_none());
        let info = pod_info(&slim);
        assert!(info.is_mirror && info.has_empty_dir && info.terminating && info.ready);
        assert_eq!(info.controller.unwrap().kind, "ReplicaSet");
    }
}

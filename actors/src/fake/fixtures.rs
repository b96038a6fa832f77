//! Test objects with sensible defaults, refined fluently:
//! `Maintenance::test("nm1").on("n1").with_finalizer()`, `PodInfo::test("app", "web-0")`,
//! `NodeState::test("n1").in_maintenance(t0())`, `Lease::test("n1", "node-healthcheck")`.

use chrono::{DateTime, TimeZone, Utc};

use super::cluster::FakeCluster;
use crate::config::defaults;
use crate::decisions;
use crate::model::{
    DrainPolicy, EXCLUDE_LABEL, EXCLUDE_LABEL_VALUE, FINALIZER, Lease, Maintenance,
    MaintenanceStatus, NodeName, NodeState, OnDrainTimeout, OwnerRef, PodInfo, PodPhase, Taint,
    Uid,
};
use crate::pdb::{IntOrPercent, LabelSelector, Pdb, PdbStatus};

/// The wall time every test starts at (tests anchor their clock here, see
/// [`super::paused_config`]).
pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or_default()
}

/// [`t0`] plus `seconds` (negative: before it).
pub fn at(seconds: i64) -> DateTime<Utc> {
    t0() + chrono::Duration::seconds(seconds)
}

impl Maintenance {
    /// A NodeMaintenance `name` (uid `uid-<name>`, reason `test`, created at [`t0`]) with no
    /// node yet, no finalizer and no status.
    pub fn test(name: &str) -> Self {
        Maintenance {
            name: name.into(),
            uid: format!("uid-{name}").into(),
            resource_version: String::new(),
            node_name: NodeName::default(),
            reason: "test".to_string(),
            creation_timestamp: t0(),
            deleting: false,
            finalizers: Vec::new(),
            status: None,
            drain_policy: DrainPolicy::default(),
            invalid: None,
        }
    }

    /// With a spec nmo finds invalid in `field` (`message` says how).
    pub fn invalid(self, field: crate::model::SpecField, message: &str) -> Self {
        Maintenance {
            invalid: Some(crate::model::SpecProblem {
                field,
                message: message.to_string(),
            }),
            ..self
        }
    }

    /// For node `node`.
    pub fn on(self, node: &str) -> Self {
        Maintenance {
            node_name: node.into(),
            ..self
        }
    }

    /// Created at `at`.
    pub fn created_at(self, at: DateTime<Utc>) -> Self {
        Maintenance {
            creation_timestamp: at,
            ..self
        }
    }

    /// With `spec.reason`.
    pub fn with_reason(self, reason: &str) -> Self {
        Maintenance {
            reason: reason.to_string(),
            ..self
        }
    }

    /// Carrying nmo's finalizer.
    pub fn with_finalizer(mut self) -> Self {
        if !self.has_finalizer() {
            self.finalizers.push(FINALIZER.to_string());
        }
        self
    }

    /// With a deletionTimestamp.
    pub fn being_deleted(self) -> Self {
        Maintenance {
            deleting: true,
            ..self
        }
    }

    /// With `spec.drainTimeout` and `spec.onDrainTimeout`.
    pub fn with_drain_timeout(
        self,
        timeout: std::time::Duration,
        on_timeout: OnDrainTimeout,
    ) -> Self {
        Maintenance {
            drain_policy: DrainPolicy {
                timeout: Some(timeout),
                on_timeout,
            },
            ..self
        }
    }

    /// With this status.
    pub fn with_status(self, status: MaintenanceStatus) -> Self {
        Maintenance {
            status: Some(status),
            ..self
        }
    }
}

impl PodInfo {
    /// A running pod `namespace/name` (uid `uid-<namespace>-<name>`) controlled by the
    /// ReplicaSet `<name>-rs`, with a 30 s grace period.
    pub fn test(namespace: &str, name: &str) -> Self {
        PodInfo {
            namespace: namespace.into(),
            name: name.into(),
            uid: format!("uid-{namespace}-{name}").into(),
            phase: PodPhase::Running,
            controller: Some(OwnerRef {
                kind: "ReplicaSet".to_string(),
                name: format!("{name}-rs"),
                uid: Uid::default(),
            }),
            is_mirror: false,
            has_empty_dir: false,
            terminating: false,
            grace_period_seconds: Some(30),
            labels: crate::model::Labels::default(),
            ready: true,
        }
    }

    /// With label `key=value`.
    pub fn labelled(mut self, key: &str, value: &str) -> Self {
        std::sync::Arc::make_mut(&mut self.labels).insert(key.to_string(), value.to_string());
        self
    }

    /// Running but not Ready (a PDB does not count it as healthy).
    pub fn not_ready(self) -> Self {
        PodInfo {
            ready: false,
            ..self
        }
    }

    /// Controlled by `kind`/`name` (e.g. a DaemonSet), whose uid is `uid-<name>`.
    pub fn controlled_by(self, kind: &str, name: &str) -> Self {
        let uid = format!("uid-{name}");
        self.controlled_by_uid(kind, name, &uid)
    }

    /// Controlled by `kind`/`name` with `uid` (e.g. a DaemonSet created again).
    pub fn controlled_by_uid(self, kind: &str, name: &str, uid: &str) -> Self {
        PodInfo {
            controller: Some(OwnerRef {
                kind: kind.to_string(),
                name: name.to_string(),
                uid: uid.into(),
            }),
            ..self
        }
    }

    /// Without a controller.
    pub fn unmanaged(self) -> Self {
        PodInfo {
            controller: None,
            ..self
        }
    }

    /// In phase `phase` (e.g. Succeeded: a finished job).
    pub fn in_phase(self, phase: PodPhase) -> Self {
        PodInfo { phase, ..self }
    }

    /// A mirror (static) pod.
    pub fn mirror(self) -> Self {
        PodInfo {
            is_mirror: true,
            ..self
        }
    }

    /// With an emptyDir volume.
    pub fn with_empty_dir(self) -> Self {
        PodInfo {
            has_empty_dir: true,
            ..self
        }
    }
}

impl NodeState {
    /// A schedulable node `name` (uid `uid-<name>`) without taints or labels.
    pub fn test(name: &str) -> Self {
        NodeState {
            name: name.into(),
            uid: format!("uid-{name}").into(),
            ready: crate::model::NodeReady::ready(),
            ..NodeState::default()
        }
    }

    /// Labelled, tainted (nmo's taints stamped `at`) and cordoned, as nmo leaves a node in
    /// maintenance; taints already there are kept.
    pub fn in_maintenance(self, at: DateTime<Utc>) -> Self {
        let mut labels = self.labels;
        labels.insert(EXCLUDE_LABEL.to_string(), EXCLUDE_LABEL_VALUE.to_string());
        NodeState {
            unschedulable: true,
            taints: decisions::with_maintenance_taints(&self.taints, at),
            labels,
            ..self
        }
    }

    /// With one more taint.
    pub fn with_taint(mut self, taint: Taint) -> Self {
        self.taints.push(taint);
        self
    }

    /// With one more label.
    pub fn with_label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// At `resourceVersion` `version`.
    pub fn at_version(self, version: &str) -> Self {
        NodeState {
            resource_version: version.to_string(),
            ..self
        }
    }
}

impl Lease {
    /// The lease of node `node` in the default lease namespace held by `holder`, renewed at
    /// [`t0`] for an hour, never transferred.
    pub fn test(node: &str, holder: &str) -> Self {
        Lease {
            namespace: defaults::LEASE_NAMESPACE.to_string(),
            name: decisions::lease_name(node),
            holder_identity: Some(holder.to_string()),
            lease_duration_seconds: Some(3600),
            acquire_time: Some(t0()),
            renew_time: Some(t0()),
            lease_transitions: Some(0),
            resource_version: String::new(),
        }
    }

    /// Acquired and renewed at `at`, valid for `seconds`.
    pub fn renewed(self, at: DateTime<Utc>, seconds: i32) -> Self {
        Lease {
            acquire_time: Some(at),
            renew_time: Some(at),
            lease_duration_seconds: Some(seconds),
            ..self
        }
    }

    /// At `resourceVersion` `version`.
    pub fn at_version(self, version: &str) -> Self {
        Lease {
            resource_version: version.to_string(),
            ..self
        }
    }

    /// With `leaseTransitions` = `transitions`.
    pub fn transitions(self, transitions: i32) -> Self {
        Lease {
            lease_transitions: Some(transitions),
            ..self
        }
    }
}

impl Pdb {
    /// PodDisruptionBudget `name` in namespace `app` over the pods labelled `app=web`,
    /// `maxUnavailable: 1`, at generation 1, with `status`.
    pub fn test(name: &str, status: PdbStatus) -> Self {
        Pdb {
            namespace: "app".into(),
            name: name.into(),
            generation: 1,
            selector: Some(LabelSelector::labels([("app", "web")])),
            min_available: None,
            max_unavailable: Some(IntOrPercent::Int(1)),
            always_allow_unhealthy: false,
            status: Some(status),
        }
    }
}

/// The lease of node `n1` held by `node-healthcheck`, renewed at `renewed` for `seconds`.
pub fn foreign_lease(renewed: DateTime<Utc>, seconds: i32, transitions: i32) -> Lease {
    Lease::test("n1", "node-healthcheck")
        .renewed(renewed, seconds)
        .transitions(transitions)
}

impl FakeCluster {
    /// A cluster with node `node` running `pods` pods `app/<node>-p<i>`.
    pub fn with_node(node: &str, pods: usize) -> Self {
        let cluster = FakeCluster::new();
        cluster.add_node(node);
        for i in 0..pods {
            cluster.add_pod(node, "app", &format!("{node}-p{i}"));
        }
        cluster
    }
}

//! What the soak does to the cluster besides creating and deleting NodeMaintenances, each a
//! situation nmo must get right while leaders are killed:
//! - a node cordoned by a person before its maintenance, whose record of that is removed from
//!   the node mid-maintenance: once given back, the node must still be cordoned (the record is
//!   written again from the NodeMaintenance's copy, never from the node in maintenance);
//! - a node whose lease Node Health Check holds, renewed a minute ahead of nmo's clock (clock
//!   skew): nmo must wait behind it, touching neither lease nor node, until it is released;
//! - a DaemonSet deleted (its pods orphaned, one left with a dangling owner reference as the
//!   garbage collector's lag leaves it) and created again under the same name: the new
//!   DaemonSet's pods must never be taken for the old one's orphans.
//!
//! Each wave gets the first two on its first and third nodes; the DaemonSet is re-created once,
//! in the second wave, on its first two nodes.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use nmo_sim::SimHandle;
use serde_json::{Value, json};

use super::audit::Audit;

const RECORD_ANNOTATION: &str = "nodemaintenance.medik8s.io/before-maintenance";
const LEASE_NAMESPACE: &str = "medik8s-leases";
/// The other operator holding a node lease.
const FOREIGN_HOLDER: &str = "node-healthcheck";
/// How far ahead of nmo's clock the foreign holder's clock runs.
const SKEW: Duration = Duration::from_secs(60);
/// How long the foreign holder keeps the node (nmo waits that long behind it).
const FOREIGN_HOLD: Duration = Duration::from_secs(10);
/// The DaemonSet re-created, from the scenario.
const DAEMONSET: &str = "node-agent-0";
const SYSTEM_NAMESPACE: &str = "kube-system";
/// How long the orphans of the deleted DaemonSet may take to go before it is created again.
const ORPHANS_GO_WITHIN: Duration = Duration::from_secs(20);

/// Where the re-creation of the DaemonSet stands.
enum Recreation {
    Pending,
    /// Deleted, its orphans (with a dangling owner reference) on these nodes.
    Deleted {
        nodes: Vec<String>,
        at: Instant,
    },
    Done,
}

/// The injections, and what the end state is judged against.
pub struct Injections {
    audit: Audit,
    /// Nodes a person cordoned before their maintenance.
    admin_cordoned: BTreeSet<String>,
    /// Nodes whose record was removed mid-maintenance, once their maintenance Succeeded.
    record_due: Vec<String>,
    /// Nodes whose lease the foreign holder holds, and since when.
    foreign: Vec<(String, Instant)>,
    recreation: Recreation,
    /// The old DaemonSet's uid.
    old_uid: String,
}

fn pod(name: &str, node: &str, owner_uid: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": SYSTEM_NAMESPACE,
            "labels": {"app": DAEMONSET},
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "DaemonSet", "name": DAEMONSET,
                "uid": owner_uid, "controller": true,
            }],
        },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "agent", "image": "registry.invalid/agent:1"}]
        }
    })
}

impl Injections {
    /// The injections of a soak whose audit is `audit`.
    pub fn new(audit: Audit) -> Self {
        Injections {
            audit,
            admin_cordoned: BTreeSet::new(),
            record_due: Vec::new(),
            foreign: Vec::new(),
            recreation: Recreation::Pending,
            old_uid: String::new(),
        }
    }

    /// The nodes a person cordoned before their maintenance.
    pub fn admin_cordoned(&self) -> &BTreeSet<String> {
        &self.admin_cordoned
    }

    /// Before the NodeMaintenances of wave `index` (of `nodes`) are created; `given_back`: the
    /// wave's maintenances are deleted later.
    pub async fn before_wave(
        &mut self,
        sim: &SimHandle,
        client: &Client,
        index: usize,
        nodes: &[String],
        given_back: bool,
    ) {
        if given_back
            && let Some(node) = nodes.first()
            && self.admin_cordoned.insert(node.clone())
        {
            let cordon = Patch::Merge(json!({"spec": {"unschedulable": true}}));
            if let Err(error) = Api::<Node>::all(client.clone())
                .patch(node, &PatchParams::default(), &cordon)
                .await
            {
                tracing::warn!(%error, node, "cannot cordon as a person would");
            }
            self.record_due.push(node.clone());
        }
        if let Some(node) = nodes.get(2) {
            self.hold_lease(sim, node);
        }
        if index == 1 && matches!(self.recreation, Recreation::Pending) {
            self.delete_daemonset(sim, client, &nodes[..nodes.len().min(2)])
                .await;
        }
    }

    /// The foreign holder takes `node`'s lease, renewed [`SKEW`] ahead of nmo's clock.
    fn hold_lease(&mut self, sim: &SimHandle, node: &str) {
        let renewed = chrono::Utc::now()
            + chrono::Duration::from_std(SKEW).unwrap_or_else(|_| chrono::Duration::zero());
        let renewed = renewed.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": format!("node-{node}"), "namespace": LEASE_NAMESPACE},
            "spec": {
                "holderIdentity": FOREIGN_HOLDER,
                "leaseDurationSeconds": 3600,
                "acquireTime": renewed,
                "renewTime": renewed,
            }
        });
        // The lease of an earlier wave's maintenance may still be there: the holder takes it
        // only when it is free.
        if sim
            .get_json(
                "coordination.k8s.io",
                "leases",
                LEASE_NAMESPACE,
                &format!("node-{node}"),
            )
            .is_some()
        {
            return;
        }
        // The lease namespace is shared by the medik8s operators: before nmo's first lease, the
        // other holder creates it (a create of one that exists fails, and changes nothing).
        let namespace = json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": LEASE_NAMESPACE},
        });
        let _ = sim.create_json("", "namespaces", "", namespace, false);
        match sim.create_json(
            "coordination.k8s.io",
            "leases",
            LEASE_NAMESPACE,
            lease,
            false,
        ) {
            Ok(_) => {
                self.audit.foreign_lease(node, true);
                self.foreign.push((node.to_string(), Instant::now()));
            }
            Err(error) => tracing::warn!(%error, node, "cannot hold the node lease"),
        }
    }

    /// Deletes the DaemonSet (its pods orphaned) and leaves, on `nodes`, a pod with a dangling
    /// owner reference to it, as the garbage collector's lag leaves one.
    async fn delete_daemonset(&mut self, sim: &SimHandle, client: &Client, nodes: &[String]) {
        let Some(old) = sim.get_json("apps", "daemonsets", SYSTEM_NAMESPACE, DAEMONSET) else {
            return;
        };
        self.old_uid = old["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if let Err(error) = Api::<DaemonSet>::namespaced(client.clone(), SYSTEM_NAMESPACE)
            .delete(DAEMONSET, &DeleteParams::orphan())
            .await
        {
            tracing::warn!(%error, "cannot delete the DaemonSet");
            self.recreation = Recreation::Done;
            return;
        }
        for node in nodes {
            let name = format!("{DAEMONSET}-lagging-{node}");
            if let Err(error) = sim.create_json(
                "",
                "pods",
                SYSTEM_NAMESPACE,
                pod(&name, node, &self.old_uid),
                false,
            ) {
                tracing::warn!(%error, node, "cannot leave an orphan");
            }
        }
        self.recreation = Recreation::Deleted {
            nodes: nodes.to_vec(),
            at: Instant::now(),
        };
    }

    /// On every look of the driver at the cluster (`succeeded`: whether a node's maintenance
    /// is Succeeded): removes due records, releases leases held long enough, and creates the
    /// DaemonSet again once its orphans are gone.
    pub async fn tend(
        &mut self,
        sim: &SimHandle,
        client: &Client,
        succeeded: impl Fn(&str) -> bool,
    ) {
        let nodes = Api::<Node>::all(client.clone());
        let (due, later): (Vec<String>, Vec<String>) =
            self.record_due.drain(..).partition(|node| succeeded(node));
        self.record_due = later;
        for node in due {
            let remove =
                Patch::Merge(json!({"metadata": {"annotations": {RECORD_ANNOTATION: null}}}));
            if let Err(error) = nodes.patch(&node, &PatchParams::default(), &remove).await {
                tracing::warn!(%error, node, "cannot remove the record");
            }
        }
        let (released, held): (Vec<_>, Vec<_>) = self
            .foreign
            .drain(..)
            .partition(|(_, since)| since.elapsed() >= FOREIGN_HOLD);
        self.foreign = held;
        for (node, _) in released {
            // Said first: nmo may take the lease the moment it is gone.
            self.audit.foreign_lease(&node, false);
            let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
                Api::namespaced(client.clone(), LEASE_NAMESPACE);
            if let Err(error) = leases
                .delete(&format!("node-{node}"), &DeleteParams::default())
                .await
            {
                tracing::warn!(%error, node, "cannot release the node lease");
            }
        }
        self.recreate(sim);
    }

    /// Creates the DaemonSet again (another uid) once its orphans are gone, with a pod of its
    /// own on each node that had one.
    fn recreate(&mut self, sim: &SimHandle) {
        let Recreation::Deleted { nodes, at } = &self.recreation else {
            return;
        };
        let orphans_gone = nodes.iter().all(|node| {
            sim.get_json(
                "",
                "pods",
                SYSTEM_NAMESPACE,
                &format!("{DAEMONSET}-lagging-{node}"),
            )
            .is_none()
        });
        if !orphans_gone && at.elapsed() < ORPHANS_GO_WITHIN {
            return;
        }
        let daemonset = json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": DAEMONSET, "namespace": SYSTEM_NAMESPACE, "labels": {"app": DAEMONSET}},
            "spec": {"selector": {"matchLabels": {"app": DAEMONSET}},
                     "template": {"metadata": {"labels": {"app": DAEMONSET}},
                                  "spec": {"containers": [{"name": "agent", "image": "registry.invalid/agent:1"}]}}}
        });
        let nodes = nodes.clone();
        self.recreation = Recreation::Done;
        let uid = match sim.create_json("apps", "daemonsets", SYSTEM_NAMESPACE, daemonset, false) {
            Ok(created) => created["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            Err(error) => {
                tracing::warn!(%error, "cannot create the DaemonSet again");
                return;
            }
        };
        for node in &nodes {
            let name = format!("{DAEMONSET}-again-{node}");
            if let Err(error) =
                sim.create_json("", "pods", SYSTEM_NAMESPACE, pod(&name, node, &uid), false)
            {
                tracing::warn!(%error, node, "cannot create the new DaemonSet's pod");
            }
        }
    }

    /// Whether every injection is over (no record still to remove, no lease still held).
    pub fn settled(&self) -> bool {
        self.record_due.is_empty() && self.foreign.is_empty()
    }
}

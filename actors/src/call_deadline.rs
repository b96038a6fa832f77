//! A deadline on every cluster call: the [`Cluster`] every actor talks to is this wrapper, so no
//! hung connection (a half-open TCP connection, an API server that stopped answering) can keep
//! a node actor's operation, an eviction slot or an undo waiting forever. A call that does not
//! answer in time fails as `Transient` and is retried like any other transient failure.
//!
//! Watches are not wrapped: they are meant to run for hours; their adapter detects a silent
//! stream itself (a watch gives up on a stream silent past its `timeoutSeconds`).
//!
//! It is also where calls wait their turn: at most `places` calls are made at once, and the
//! others wait here, before the call is made, rather than deep in the client with their
//! requests built. A thousand maintenances starting at once queue thousands of calls; waiting
//! here, each costs a few hundred bytes instead of the ~8 KB of a built request and its
//! client futures (the heap profile at 1,000 drains). The wait counts against the call's
//! deadline, as it did in the client: a call is answered or failed within its limit.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use tokio::sync::Semaphore;

use crate::interception::EvictionWebhooks;
use crate::model::{
    Event, Lease, Maintenance, MaintenanceName, MaintenanceStatus, NodeName, NodeOwner, NodePatch,
    NodeState, NodeSummaryEvent, PodList, StatusPrecondition, Uid,
};
use crate::pdb::PdbPod;
use crate::pdb::{LabelSelector, PdbChange};
use crate::ports::{Cluster, ClusterError, EvictionOutcome};

/// [`Cluster`] with at most `places` calls at once, each cut off after `limit`.
pub struct Bounded {
    inner: Arc<dyn Cluster>,
    limit: Duration,
    places: Semaphore,
}

impl Bounded {
    /// Wraps `inner`; at most `places` calls at once (at least one), each taking at most
    /// `limit`.
    pub fn new(inner: Arc<dyn Cluster>, limit: Duration, places: usize) -> Self {
        Bounded {
            inner,
            limit,
            places: Semaphore::new(places.max(1)),
        }
    }

    /// Makes the call `call` makes once a place is free, cut off after the limit.
    async fn within<T, F>(&self, what: &str, call: impl FnOnce() -> F) -> Result<T, ClusterError>
    where
        F: Future<Output = Result<T, ClusterError>>,
    {
        let in_turn = async {
            // The semaphore is never closed: no error to handle.
            let _place = self.places.acquire().await.ok();
            call().await
        };
        match tokio::time::timeout(self.limit, in_turn).await {
            Ok(result) => result,
            Err(_) => Err(ClusterError::Transient(format!(
                "{what}: no answer within {:?}",
                self.limit
            ))),
        }
    }
}

#[async_trait]
impl Cluster for Bounded {
    async fn get_maintenance(
        &self,
        name: &MaintenanceName,
    ) -> Result<Option<Maintenance>, ClusterError> {
        self.within("get NodeMaintenance", || self.inner.get_maintenance(name))
            .await
    }

    async fn add_finalizer(
        &self,
        name: &MaintenanceName,
        seen: &[String],
    ) -> Result<(), ClusterError> {
        self.within("add finalizer", || self.inner.add_finalizer(name, seen))
            .await
    }

    async fn remove_finalizer(
        &self,
        name: &MaintenanceName,
        uid: &Uid,
        seen: &[String],
    ) -> Result<(), ClusterError> {
        self.within("remove finalizer", || {
            self.inner.remove_finalizer(name, uid, seen)
        })
        .await
    }

    async fn write_status(
        &self,
        name: &MaintenanceName,
        uid: &Uid,
        seen: StatusPrecondition,
        status: &MaintenanceStatus,
    ) -> Result<(), ClusterError> {
        self.within("write status", || {
            self.inner.write_status(name, uid, seen, status)
        })
        .await
    }

    async fn emit_event(&self, event: &Event) -> Result<(), ClusterError> {
        self.within("emit event", || self.inner.emit_event(event))
            .await
    }

    async fn get_node(&self, name: &NodeName) -> Result<Option<NodeState>, ClusterError> {
        self.within("get node", || self.inner.get_node(name)).await
    }

    async fn patch_node(&self, patch: &NodePatch) -> Result<NodeState, ClusterError> {
        self.within("patch node", || self.inner.patch_node(patch))
            .await
    }

    fn watch_node(&self, name: &NodeName) -> BoxStream<'static, Option<NodeState>> {
        self.inner.watch_node(name)
    }

    fn watch_node_summaries(&self) -> BoxStream<'static, NodeSummaryEvent> {
        self.inner.watch_node_summaries()
    }

    fn watch_lease(&self, namespace: &str, name: &str) -> BoxStream<'static, Option<Lease>> {
        self.inner.watch_lease(namespace, name)
    }

    async fn ensure_namespace(&self, namespace: &str) -> Result<(), ClusterError> {
        self.within("ensure namespace", || {
            self.inner.ensure_namespace(namespace)
        })
        .await
    }

    async fn get_lease(&self, namespace: &str, name: &str) -> Result<Option<Lease>, ClusterError> {
        self.within("get lease", || self.inner.get_lease(namespace, name))
            .await
    }

    async fn list_leases(&self, namespace: &str) -> Result<Vec<Lease>, ClusterError> {
        self.within("list leases", || self.inner.list_leases(namespace))
            .await
    }

    async fn create_lease(&self, lease: &Lease, owner: &NodeOwner) -> Result<Lease, ClusterError> {
        self.within("create lease", || self.inner.create_lease(lease, owner))
            .await
    }

    async fn update_lease(&self, lease: &Lease) -> Result<Lease, ClusterError> {
        self.within("update lease", || self.inner.update_lease(lease))
            .await
    }

    async fn delete_lease(&self, lease: &Lease) -> Result<(), ClusterError> {
        self.within("delete lease", || self.inner.delete_lease(lease))
            .await
    }

    async fn list_pods(&self, node: &NodeName) -> Result<PodList, ClusterError> {
        self.within("list pods", || self.inner.list_pods(node))
            .await
    }

    fn watch_pods(&self, node: &NodeName) -> BoxStream<'static, PodList> {
        self.inner.watch_pods(node)
    }

    async fn daemonset_exists(
        &self,
        namespace: &str,
        name: &str,
        uid: &Uid,
    ) -> Result<bool, ClusterError> {
        self.within("look up DaemonSet", || {
            self.inner.daemonset_exists(namespace, name, uid)
        })
        .await
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &Uid,
        grace_period_seconds: Option<i64>,
    ) -> Result<(), ClusterError> {
        self.within("delete pod", || {
            self.inner
                .delete_pod(namespace, name, uid, grace_period_seconds)
        })
        .await
    }

    async fn evict_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &Uid,
        grace_period_seconds: Option<i64>,
    ) -> Result<EvictionOutcome, ClusterError> {
        self.within("evict pod", || {
            self.inner
                .evict_pod(namespace, name, uid, grace_period_seconds)
        })
        .await
    }

    fn watch_pdbs(&self) -> BoxStream<'static, PdbChange> {
        self.inner.watch_pdbs()
    }

    fn watch_eviction_webhooks(&self) -> BoxStream<'static, EvictionWebhooks> {
        self.inner.watch_eviction_webhooks()
    }

    fn watch_vms(&self, node: &NodeName) -> BoxStream<'static, crate::model::VmList> {
        self.inner.watch_vms(node)
    }

    async fn list_selected_pods(
        &self,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Result<Vec<PdbPod>, ClusterError> {
        self.within("list a budget's pods", || {
            self.inner.list_selected_pods(namespace, selector)
        })
        .await
    }

    async fn list_maintained_nodes(&self) -> Result<Vec<NodeState>, ClusterError> {
        self.within("list maintained nodes", || {
            self.inner.list_maintained_nodes()
        })
        .await
    }

    async fn list_maintenances(&self) -> Result<Vec<Maintenance>, ClusterError> {
        self.within("list NodeMaintenances", || self.inner.list_maintenances())
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::FakeCluster;

    #[tokio::test(start_paused = true)]
    async fn a_call_that_never_answers_fails_after_the_limit() {
        let fake = FakeCluster::with_node("n1", 0);
        fake.hang_next("get_node", 1);
        let bounded = Bounded::new(Arc::new(fake.clone()), Duration::from_secs(10), 4);
        let started = tokio::time::Instant::now();
        let result = bounded.get_node(&"n1".into()).await;
        assert!(
            matches!(&result, Err(ClusterError::Transient(m)) if m.contains("no answer within 10s")),
            "{result:?}"
        );
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        let again = bounded.get_node(&"n1".into()).await;
        assert!(matches!(again, Ok(Some(_))), "the next call is answered");
    }

    /// A call waits for a place before it is made (its request is not built meanwhile), and
    /// the wait counts against its deadline.
    #[tokio::test(start_paused = true)]
    async fn a_call_is_made_only_once_a_place_is_free() {
        let fake = FakeCluster::with_node("n1", 0);
        fake.hang_next("get_node", 2);
        let bounded = Arc::new(Bounded::new(
            Arc::new(fake.clone()),
            Duration::from_secs(10),
            1,
        ));
        let first = tokio::spawn({
            let bounded = bounded.clone();
            async move { bounded.get_node(&"n1".into()).await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        let second = tokio::spawn({
            let bounded = bounded.clone();
            async move {
                let asked = tokio::time::Instant::now();
                (bounded.get_node(&"n1".into()).await, asked.elapsed())
            }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            fake.count_calls("get_node"),
            1,
            "the second call waits its turn"
        );
        let first = first.await.expect("the first call's task");
        assert!(
            matches!(first, Err(ClusterError::Transient(_))),
            "{first:?}"
        );
        let (second, took) = second.await.expect("the second call's task");
        assert!(
            matches!(&second, Err(ClusterError::Transient(m)) if m.contains("no answer within 10s")),
            "{second:?}"
        );
        assert_eq!(
            took,
            Duration::from_secs(10),
            "9 s of waiting and 1 s of its own call: its deadline counts from when it was asked"
        );
        assert_eq!(fake.count_calls("get_node"), 2, "made once the first ended");
        let third = bounded.get_node(&"n1".into()).await;
        assert!(matches!(third, Ok(Some(_))), "{third:?}");
    }
}

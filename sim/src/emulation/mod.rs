//! Workloads that act on eviction requests, emulated from what their projects document, for
//! tests and benchmarks against any API server (the simulator, which calls admission webhooks
//! on `pods/eviction` as kube-apiserver does, or a real one), through a kube client:
//! - [`kubevirt`]: KubeVirt's virt-api eviction webhook and its migration controller;
//! - [`strimzi`]: Strimzi's Drain Cleaner and the Cluster Operator's rolling restart;
//! - [`webhook`]: the HTTPS admission webhook they answer through;
//! - [`pods`]: a watch of a workload's pods that records a pod deleted while it ran.

mod interceptor;
pub mod kubevirt;
pub mod pods;
pub mod strimzi;
pub mod webhook;

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

/// Why an emulation could not start or act.
#[derive(Debug, thiserror::Error)]
pub enum EmulationError {
    /// An API call failed.
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
    /// An object could not be built.
    #[error("bad object: {0}")]
    Json(#[from] serde_json::Error),
    /// The webhook server could not listen.
    #[error("webhook server: {0}")]
    Io(#[from] std::io::Error),
    /// Its TLS configuration could not be made.
    #[error("webhook TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// Its certificate could not be made.
    #[error("webhook certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    /// Something the emulation waits for did not happen.
    #[error("{0}")]
    NotReady(String),
}

/// Locks `mutex`, whatever a panicking holder left.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Running and Ready.
fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// How often [`wait_for`] looks.
const WAIT_POLL: Duration = Duration::from_millis(100);

/// Waits (up to `within`) until `pods` says `done` of pod `name` (an error reading it reads
/// as no pod).
async fn wait_for(
    pods: &Api<Pod>,
    name: &str,
    within: Duration,
    done: impl Fn(Option<&Pod>) -> bool,
) {
    let tries = within.as_millis() / WAIT_POLL.as_millis();
    for _ in 0..tries {
        if done(pods.get_opt(name).await.ok().flatten().as_ref()) {
            return;
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}

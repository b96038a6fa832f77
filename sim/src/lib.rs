//! nmo-sim: a fake kube-apiserver for tests, demos and benchmarks.
//!
//! An in-process HTTP server that speaks the Kubernetes REST API over plain HTTP on 127.0.0.1
//! closely enough that kube-rs and `kubectl` cannot tell it from a real API server for what an
//! operator such as nmo uses, with a small live cluster behind it on its own thread: a kubelet
//! (pods become Running/Ready, terminating pods go after their grace period, time scalable down
//! to instant), a scheduler-lite, ReplicaSet and DaemonSet controllers, the disruption
//! controller (PodDisruptionBudget status), the namespace controller and a garbage collector.
//! On top of a real server it offers what tests need: request accounting by verb, resource and
//! identity, fault injection (errors, latency, 409 storms, watches closed early), RBAC enforced
//! for one identity from ClusterRole manifests, and realistic scenarios seeded in one call.
//!
//! It knows nothing of nmo: CRDs (the NodeMaintenance CRD included) and RBAC rules are given by
//! the caller, as JSON objects or manifest files.
//!
//! Resources: core/v1 nodes, pods (with `eviction` and `status`), namespaces, events;
//! events.k8s.io/v1 events (one storage with core/v1 events, as in the real server);
//! coordination/v1 leases; policy/v1 PodDisruptionBudgets; apps/v1 ReplicaSets and DaemonSets;
//! apiextensions/v1 CustomResourceDefinitions and the custom resources they define (with
//! the status subresource, structural-schema defaulting, pruning and validation); discovery,
//! a minimal OpenAPI v3 (paths, no schemas) and `meta.k8s.io/v1` Table responses for kubectl.
//!
//! Where it is NOT faithful (do not test these against it; use a real kube-apiserver):
//! - Only the resources above exist; any other path is a 404 `Status`, never a silent success.
//! - Security: plain HTTP, no TLS, no client certificates; a bearer token maps to a user name
//!   and RBAC is enforced for one configured identity only (every other identity may do all).
//! - Admission: no admission webhooks are called (nmo's validating webhook never sees a
//!   request) and only a few built-in admission checks exist (NamespaceLifecycle,
//!   DefaultTolerationSeconds); CEL validation rules other than `self == oldSelf` are ignored.
//! - Patches: strategic merge knows the patch strategies of the fields nmo and kubectl patch,
//!   not every field's; server-side apply is simplified (no managed fields, no conflicts).
//! - Controllers are simplified: no real scheduling (no resources, affinity or preemption:
//!   the emptiest schedulable node whose taints are tolerated), no Deployments, StatefulSets or
//!   Jobs, no container runtime (containers never fail or restart), no node heartbeats or
//!   node lifecycle controller.
//! - Storage is in memory, with one global resourceVersion counter and a bounded watch
//!   history per resource (older versions get 410 Gone); no etcd compaction timing, no
//!   protobuf, JSON only.
//!
//! ```ignore
//! use std::time::Duration;
//! use nmo_sim::{FaultRule, Query, Scenario, SimConfig, Simulator};
//! // A CRD preinstalled (any serializable CustomResourceDefinition, e.g. `NodeMaintenance::crd()`),
//! // 3 nodes with 10 pods each, the cluster running 100x faster than real time.
//! let sim = Simulator::start(
//!     SimConfig::default().crd(&crd)?.scenario(Scenario::new(3, 10)).time_scale(0.01),
//! )
//! .await?;
//! let client = sim.kube_client()?; // or kube_client_with(&ClientOptions { user_agent, token, .. })
//! sim.write_kubeconfig(std::path::Path::new("/tmp/sim.kubeconfig"))?; // for kubectl
//! // ... run the operator against `client` ...
//! let evictions = sim.requests(&Query::all().verb("create").resource("pods").subresource("eviction"));
//! sim.faults().add(FaultRule::on(Some("patch"), Some("nodes")).conflicts(0.5));
//! sim.faults().add(FaultRule::on(Some("watch"), None).close_watches_after(Some(Duration::from_secs(5)), None));
//! sim.shutdown().await;
//! ```
//!
//! Request counters are also served as JSON at `GET /debug/sim/requests` (`DELETE` resets).
//!
//! Modules, leaves first: `errors`, `resources` (the resource registry), `object` (one stored
//! object), `selectors`, `store` (objects, resourceVersions, watch history), `rest` (the API's
//! semantics over the store), `router` (HTTP), the controllers (`kubelet`, `scheduler`, `pdb`,
//! workloads, lifecycle), `scenario` (seeding), `simulator` (start, stop, test hooks); `testing` has the one
//! `eventually` that the tests of this crate and of nmo wait with.

pub mod accounting;
pub mod api_seed;
pub mod cli;
mod controller;
pub mod convert;
pub mod discovery;
pub mod errors;
pub mod eviction;
pub mod faults;
pub mod kubeconfig;
pub mod kubelet;
mod lifecycle;
pub mod object;
pub mod openapi;
pub mod patch;
pub mod pdb;
pub mod rbac;
pub mod resources;
pub mod rest;
pub mod router;
pub mod scenario;
pub mod scheduler;
pub mod schema;
pub mod selectors;
mod simulator;
pub mod store;
pub mod table;
pub mod testing;
pub mod watch;
mod workloads;

pub use accounting::{Accounting, Query, RequestKey};
pub use errors::{ApiError, SimError};
pub use faults::{FaultRule, Faults};
pub use kubelet::Timing;
pub use rbac::Rbac;
pub use rest::{Api, DeleteOpts, Deleted, Sub};
pub use scenario::{Scenario, ScenarioReport};
pub use simulator::{ClientOptions, SimConfig, SimHandle, Simulator, default_kubeconfig_path};
pub use store::Store;

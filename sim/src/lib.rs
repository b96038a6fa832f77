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
//! Where it is NOT faithful (do not test these against it; use a real kube-apiserver). The
//! fidelity suite (tests/it/fidelity) sends the same requests to the simulator and to
//! kube-apiserver 1.36 and compares codes, `Status` bodies and objects; what it found was
//! fixed (pod defaults and validation, list items without `apiVersion`/`kind`, generation only
//! where the real server keeps one, a `Status` for deleted custom resources, JSON patch errors
//! without causes, `DisruptionTarget` on evicted pods, event namespaces, lease updates...) or
//! is listed here, each with its case:
//! - Only the resources above exist; any other path is a 404 `Status`, never a silent success
//!   (the real server answers a path no route serves with a plain-text `404 page not found`).
//! - Security: plain HTTP, no TLS, no client certificates; a bearer token maps to a user name
//!   and RBAC is enforced for one configured identity only (every other identity may do all).
//! - Admission: no admission webhooks are called (nmo's validating webhook never sees a
//!   request) and only a few built-in admission checks exist (NamespaceLifecycle,
//!   DefaultTolerationSeconds, Priority; ServiceAccount's `serviceAccountName: default`
//!   without the token volume it adds); CEL validation rules other than `self == oldSelf` are
//!   ignored. A new Node gets no `node.kubernetes.io/not-ready` taint (the real NodeTaint
//!   admission adds one, which its node lifecycle controller removes once the node is Ready).
//! - Validation of built-in kinds covers what clients meet: a pod's containers, what a pod
//!   update may change (the real message also carries a diff of the specs), a lease's
//!   duration, an event's namespace and `eventTime`; not every field. Custom resources are
//!   validated against their schema, but on a status write a type error names the field from
//!   the object (`status.drainProgress in body`) where the real server names it from the
//!   status, and several causes come in a fixed order (the real server's follows Go's map
//!   order). The real server reports the "no new finalizers" cause twice; the simulator once.
//!   A kind that does not match the path is a 400 worded differently.
//! - Serialization: the simulator keeps what it is given, where the real server's Go types
//!   omit empty lists and maps (`conditions: []` stays) and serialize empty structs (a Node's
//!   `status.daemonEndpoints` and `nodeInfo`, which the simulator adds only to the objects it
//!   makes itself). Lists carry no `remainingItemCount`.
//! - Patches: strategic merge knows the patch strategies of the fields nmo and kubectl patch,
//!   not every field's; server-side apply is simplified (no managed fields, no conflicts).
//! - Watches: a watch from a resourceVersion older than the simulator keeps (`history_limit`
//!   events per resource) ends with a 410 `Expired` event; kube-apiserver 1.36 serves such a
//!   watch from its watch cache by replaying the current objects as ADDED events, and answers
//!   410 only for a version its cache window and etcd's compaction no longer have (the same
//!   410 body; a continued list past compaction is compared directly).
//! - Controllers are simplified: no real scheduling (no resources, affinity or preemption:
//!   the emptiest schedulable node whose taints are tolerated), no Deployments, StatefulSets or
//!   Jobs, no container runtime (containers never fail or restart), no node heartbeats or
//!   node lifecycle controller (a cordoned node gets no `node.kubernetes.io/unschedulable`
//!   taint from it, nor the TTL controller's annotation), a ReplicaSet controller that does not
//!   adopt orphans, and DaemonSets that make no pods (seed them; `api_seed` does it on a real
//!   server). They react within a moment where kube-controller-manager's work queues take
//!   longer: a race between a change and the status that follows it shows more often on a
//!   real server (e.g. an eviction sent after a PodDisruptionBudget's spec changed and before
//!   its `observedGeneration` caught up gets the 429 "still being processed"; nmo's operator
//!   tests on both backends meet it, see tests/it/observability_e2e.rs).
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
//! object), `selectors`, `store` (objects, resourceVersions, watch history), `validation` and
//! `strategy` (what the real server's registry checks and fills in), `rest` (the API's
//! semantics over the store), `router` (HTTP), the controllers (`kubelet`, `scheduler`, `pdb`,
//! workloads, lifecycle), `scenario` (seeding), `simulator` (start, stop, test hooks); `testing`
//! has the one `eventually` that the tests of this crate and of nmo wait with.
//!
//! For other API servers (a real kube-apiserver has no kubelet): `kubelet::remote` plays the
//! kubelet of a set of nodes through a kube client, with the same decisions as the
//! simulator's own kubelet (`kubelet::rules`); `api_seed` seeds a [`Scenario`] through the API
//! of a real server, whose controllers then make what the simulator's seeding writes directly.

pub mod accounting;
pub mod admission;
pub mod api_seed;
pub mod audit;
pub mod cli;
mod controller;
pub mod convert;
pub mod discovery;
pub mod emulation;
pub mod errors;
pub mod eviction;
pub mod faults;
pub mod kubeconfig;
pub mod kubelet;
mod lifecycle;
pub mod list_item;
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
pub mod server;
mod simulator;
pub mod store;
pub mod strategy;
pub mod table;
pub mod validation;
pub mod watch;
mod workloads;

pub use accounting::{Accounting, Query, RequestKey};
pub use audit::{AuditHook, OutcomeHook, Served};
pub use errors::{ApiError, SimError};
pub use faults::{FaultRule, Faults};
pub use kubelet::Timing;
pub use rbac::Rbac;
pub use rest::{Api, DeleteOpts, Deleted, Sub};
pub use scenario::{Scenario, ScenarioReport};
pub use simulator::{ClientOptions, SimConfig, SimHandle, Simulator, default_kubeconfig_path};
pub use store::Store;

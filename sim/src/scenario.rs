//! Seeding: realistic objects (a Node of 10-15 KiB of JSON with conditions, capacity,
//! nodeInfo, addresses and ~50 images; Pods with containers, resources, env, probes, volumes and
//! tolerations) and a scenario builder: N nodes, P pods per node, ReplicaSets with PDBs spread
//! across nodes, DaemonSets with a pod per node, mirror (static) pods, emptyDir pods, unmanaged
//! pods and finished pods.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::errors::SimError;
use crate::kubelet::{pod_ip, running_status};
use crate::resources::names;
use crate::rest::{Api, new_uid, now_rfc3339};

/// Namespace of the scenario's workloads.
pub const WORKLOAD_NS: &str = "workloads";

/// A scenario to seed.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Number of nodes.
    pub nodes: usize,
    /// Pods per node (all kinds together).
    pub pods_per_node: usize,
    /// Node name prefix (`<prefix><index>`).
    pub node_prefix: String,
    /// Number of ReplicaSets whose pods are spread across all nodes.
    pub replicasets: usize,
    /// The PDB spec fields given to each spread ReplicaSet (e.g. `{"maxUnavailable": 1}`); None:
    /// no PDBs.
    pub pdb: Option<Value>,
    /// DaemonSets (each with a pod on every node, in kube-system).
    pub daemonsets: usize,
    /// One mirror (static) pod per node, in kube-system.
    pub mirror_pods: bool,
    /// One pod with an emptyDir volume per node (from a ReplicaSet without PDB).
    pub emptydir_pods: bool,
    /// One unmanaged pod per node.
    pub unmanaged_pods: bool,
    /// One finished (Succeeded) pod per node.
    pub finished_pods: bool,
    /// The namespace of the ReplicaSets, their budgets and pods, and of the unmanaged and
    /// finished pods (default [`WORKLOAD_NS`]).
    pub workload_namespace: String,
    /// The namespace of the DaemonSets and mirror pods (default `kube-system`).
    pub system_namespace: String,
    /// Labels every node of the scenario carries; when set, the DaemonSets and ReplicaSets
    /// select these nodes (`nodeSelector`), so that their pods and replacements stay on them
    /// in a cluster shared with other nodes.
    pub node_labels: BTreeMap<String, String>,
}

impl Scenario {
    /// N nodes with P pods each, with one of every special kind per node, 1 DaemonSet and
    /// ReplicaSets (with `maxUnavailable: 1` PDBs) for the rest.
    pub fn new(nodes: usize, pods_per_node: usize) -> Self {
        Scenario {
            nodes,
            pods_per_node,
            node_prefix: "node-".into(),
            replicasets: nodes.clamp(1, 20),
            pdb: Some(json!({"maxUnavailable": 1})),
            daemonsets: 1,
            mirror_pods: true,
            emptydir_pods: true,
            unmanaged_pods: true,
            finished_pods: true,
            workload_namespace: WORKLOAD_NS.into(),
            system_namespace: "kube-system".into(),
            node_labels: BTreeMap::new(),
        }
    }

    /// Only nodes and spread ReplicaSet pods (no special pods, no DaemonSets).
    pub fn plain(nodes: usize, pods_per_node: usize) -> Self {
        Scenario {
            daemonsets: 0,
            mirror_pods: false,
            emptydir_pods: false,
            unmanaged_pods: false,
            finished_pods: false,
            ..Self::new(nodes, pods_per_node)
        }
    }

    /// Sets the number of spread ReplicaSets.
    #[must_use]
    pub fn replicasets(mut self, n: usize) -> Self {
        self.replicasets = n.max(1);
        self
    }

    /// Sets the PDB spec fields (None: no PDBs).
    #[must_use]
    pub fn pdb(mut self, spec: Option<Value>) -> Self {
        self.pdb = spec;
        self
    }

    /// Sets the number of DaemonSets.
    #[must_use]
    pub fn daemonsets(mut self, n: usize) -> Self {
        self.daemonsets = n;
        self
    }

    /// The name of node `i`.
    pub fn node_name(&self, i: usize) -> String {
        format!("{}{i}", self.node_prefix)
    }

    /// The names of every node.
    pub fn node_names(&self) -> Vec<String> {
        (0..self.nodes).map(|i| self.node_name(i)).collect()
    }

    /// Pod templates select the scenario's nodes ([`Scenario::node_labels`]), if any.
    pub(crate) fn select_nodes(&self, template_spec: &mut Value) {
        if !self.node_labels.is_empty() {
            template_spec["nodeSelector"] = json!(self.node_labels);
        }
    }

    /// How many pods of each kind a node gets: (specials, spread ReplicaSet pods, spread
    /// ReplicaSets).
    pub(crate) fn layout(&self) -> (usize, usize, usize) {
        let specials = self.daemonsets
            + usize::from(self.mirror_pods)
            + usize::from(self.emptydir_pods)
            + usize::from(self.unmanaged_pods)
            + usize::from(self.finished_pods);
        let spread = self.pods_per_node.saturating_sub(specials);
        let rs_count = if spread > 0 {
            self.replicasets.max(1)
        } else {
            0
        };
        (specials, spread, rs_count)
    }
}

/// What a scenario created.
#[derive(Debug, Clone, Default)]
pub struct ScenarioReport {
    /// Node names.
    pub nodes: Vec<String>,
    /// Number of pods.
    pub pods: usize,
    /// (namespace, name) of the ReplicaSets.
    pub replicasets: Vec<(String, String)>,
    /// (namespace, name) of the PDBs.
    pub pdbs: Vec<(String, String)>,
    /// (namespace, name) of the DaemonSets.
    pub daemonsets: Vec<(String, String)>,
}

fn hexs(n: usize) -> String {
    crate::kubelet::rand_hex(n)
}

/// A healthy node's conditions, as its kubelet last posted them at `now`.
fn node_conditions(now: &str) -> Value {
    let cond = |t: &str, st: &str, reason: &str, msg: &str| json!({"type": t, "status": st, "lastHeartbeatTime": now, "lastTransitionTime": now, "reason": reason, "message": msg});
    json!([
        cond(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available"
        ),
        cond(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure"
        ),
        cond(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available"
        ),
        cond(
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status"
        )
    ])
}

/// The ~50 images a node reports (`status.images`).
fn node_images() -> Vec<Value> {
    let repos = [
        "registry.k8s.io/kube-proxy",
        "registry.k8s.io/pause",
        "docker.io/library/nginx",
        "quay.io/prometheus/node-exporter",
        "docker.io/calico/node",
        "docker.io/calico/cni",
        "registry.k8s.io/coredns/coredns",
        "quay.io/jetstack/cert-manager-controller",
        "docker.io/grafana/promtail",
        "ghcr.io/fluxcd/source-controller",
    ];
    (0..50)
        .map(|i| {
            let repo = repos[i % repos.len()];
            let tag = format!("v1.{}.{}", i / repos.len() + 20, i % 7);
            json!({
                "names": [format!("{repo}@sha256:{}", hexs(64)), format!("{repo}:{tag}")],
                "sizeBytes": 10_000_000 + (i as u64) * 3_141_592
            })
        })
        .collect()
}

/// A realistic Node (10-15 KiB of JSON).
pub fn node(name: &str, index: usize) -> Value {
    let now = now_rfc3339();
    let ip = format!(
        "10.{}.{}.{}",
        (index >> 16) & 255,
        (index >> 8) & 255,
        (index & 255).max(1)
    );
    let images = node_images();
    let zone = format!("eu-west-1{}", ["a", "b", "c"][index % 3]);
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m5.2xlarge",
                "topology.kubernetes.io/region": "eu-west-1", "topology.kubernetes.io/zone": zone,
                "failure-domain.beta.kubernetes.io/region": "eu-west-1", "failure-domain.beta.kubernetes.io/zone": zone
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "csi.volume.kubernetes.io/nodeid": format!("{{\"ebs.csi.aws.com\":\"i-{}\"}}", hexs(17)),
                "projectcalico.org/IPv4Address": format!("{ip}/20"),
                "projectcalico.org/IPv4VXLANTunnelAddr": format!("192.168.{}.{}", index % 250, (index / 250) % 250)
            }
        },
        "spec": {
            "podCIDR": format!("100.{}.{}.0/24", (index >> 8) & 255, index & 255),
            "podCIDRs": [format!("100.{}.{}.0/24", (index >> 8) & 255, index & 255)],
            "providerID": format!("aws:///{zone}/i-{}", hexs(17))
        },
        "status": {
            "capacity": {"cpu": "8", "ephemeral-storage": "104845292Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": "32386524Ki", "pods": "110"},
            "allocatable": {"cpu": "7910m", "ephemeral-storage": "95551679124", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": "31369692Ki", "pods": "110"},
            "conditions": node_conditions(&now),
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "InternalDNS", "address": format!("ip-{}.eu-west-1.compute.internal", ip.replace('.', "-"))},
                {"type": "Hostname", "address": name}
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": hexs(32), "systemUUID": new_uid(), "bootID": new_uid(),
                "kernelVersion": "6.1.112-124.190.amzn2023.x86_64", "osImage": "Amazon Linux 2023.6.20241031",
                "containerRuntimeVersion": "containerd://1.7.23", "kubeletVersion": "v1.33.0",
                "kubeProxyVersion": "v1.33.0", "operatingSystem": "linux", "architecture": "amd64"
            },
            "images": images,
            "config": {}
        }
    })
}

fn container(app: &str, image: &str, extra_mounts: &[Value]) -> Value {
    let probe = |path: &str| {
        json!({"httpGet": {"path": path, "port": 8080, "scheme": "HTTP"}, "initialDelaySeconds": 10,
               "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
    };
    let mut mounts = vec![
        json!({"name": "config", "mountPath": "/etc/app", "readOnly": true}),
        json!({"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}),
    ];
    mounts.extend(extra_mounts.iter().cloned());
    json!({
        "name": app,
        "image": image,
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}, {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
        "env": [
            {"name": "APP_NAME", "value": app},
            {"name": "LOG_LEVEL", "value": "info"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}},
            {"name": "GOMAXPROCS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1"}}}
        ],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
        "livenessProbe": probe("/healthz"),
        "readinessProbe": probe("/ready"),
        "volumeMounts": mounts,
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
        "securityContext": {"allowPrivilegeEscalation": false, "runAsNonRoot": true, "capabilities": {"drop": ["ALL"]}}
    })
}

/// A realistic pod spec (no nodeName). `emptydir` adds an emptyDir volume.
pub fn pod_spec(app: &str, emptydir: bool) -> Value {
    let mut volumes = vec![
        json!({"name": "config", "configMap": {"name": format!("{app}-config"), "defaultMode": 420}}),
        json!({"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
        ]}}),
    ];
    let mut extra = Vec::new();
    if emptydir {
        volumes.push(json!({"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}));
        extra.push(json!({"name": "scratch", "mountPath": "/scratch"}));
    }
    json!({
        "containers": [container(app, &format!("registry.example.com/{app}:1.4.2"), &extra)],
        "volumes": volumes,
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "securityContext": {"fsGroup": 2000},
        "schedulerName": "default-scheduler",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        ],
        "enableServiceLinks": true,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0
    })
}

/// A Running, Ready pod on a node.
pub fn running_pod(
    name: &str,
    ns: &str,
    node: &str,
    node_ip: &str,
    labels: Value,
    owner: Option<Value>,
    spec: Value,
) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": spec,
    });
    if let Some(o) = owner {
        pod["metadata"]["ownerReferences"] = json!([o]);
    }
    pod["spec"]["nodeName"] = json!(node);
    pod["status"] = running_status(&pod, node_ip, &pod_ip(), &now_rfc3339());
    pod
}

pub(crate) fn owner(kind: &str, api_version: &str, name: &str, uid: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true})
}

/// Name suffixes that look like the real random ones, made from a counter.
pub(crate) struct Suffixes(usize);

impl Suffixes {
    /// The suffixes after counter `n`.
    pub(crate) fn starting_at(n: usize) -> Self {
        Suffixes(n)
    }

    /// The next suffix.
    pub(crate) fn next(&mut self) -> String {
        self.0 += 1;
        // Spread the letters so names look like the real random suffixes.
        suffix(self.0.wrapping_mul(2_654_435_761) % 14_348_907)
    }
}

fn suffix(i: usize) -> String {
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = i;
    let mut s = String::new();
    for _ in 0..5 {
        s.push(ALPHA[n % ALPHA.len()] as char);
        n /= ALPHA.len();
    }
    s
}

/// (app, pod template hash, name) of spread ReplicaSet `r`, as the simulator names them.
pub(crate) fn spread_replicaset(r: usize) -> (String, String, String) {
    let app = format!("app-{r}");
    let hash = format!("{:010x}", 0x5d8f_7c6b4_u64 + r as u64);
    let name = format!("{app}-{hash}");
    (app, hash, name)
}

/// The ReplicaSet of the emptyDir pods (one per node).
pub(crate) const CACHE_REPLICASET: &str = "cache-6b7c9d8f5e";
/// Its pod template hash.
pub(crate) const CACHE_HASH: &str = "6b7c9d8f5e";

/// A spread (or the emptyDir) ReplicaSet of the scenario, in its workload namespace.
pub(crate) fn replicaset(
    s: &Scenario,
    name: &str,
    app: &str,
    hash: &str,
    replicas: usize,
    emptydir: bool,
) -> Value {
    let mut spec = pod_spec(app, emptydir);
    s.select_nodes(&mut spec);
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": s.workload_namespace, "labels": {"app": app, "pod-template-hash": hash}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": app, "pod-template-hash": hash}},
            "template": {"metadata": {"labels": {"app": app, "pod-template-hash": hash}}, "spec": spec}
        }
    })
}

/// DaemonSet `name` of the scenario, in its system namespace.
pub(crate) fn daemonset(s: &Scenario, name: &str) -> Value {
    let mut spec = pod_spec(name, false);
    s.select_nodes(&mut spec);
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": s.system_namespace, "labels": {"app": name}},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}
    })
}

/// The budget of the spread ReplicaSet of `app`, if the scenario has budgets.
pub(crate) fn pdb(s: &Scenario, app: &str) -> Option<Value> {
    let mut spec = s.pdb.clone()?;
    spec["selector"] = json!({"matchLabels": {"app": app}});
    Some(
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": format!("{app}-pdb"), "namespace": s.workload_namespace},
                "spec": spec}),
    )
}

fn ensure_namespace(api: &Api, ns: &str) -> Result<(), SimError> {
    let d = api.def(names::NAMESPACES)?;
    if api.store.get(&d, "", ns).is_none() {
        api.create(
            &d,
            "",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            false,
            false,
        )?;
    }
    Ok(())
}

/// Seeds a scenario into the store (directly, not through HTTP).
pub fn apply(api: &Arc<Api>, s: &Scenario) -> Result<ScenarioReport, SimError> {
    let mut rep = ScenarioReport::default();
    ensure_namespace(api, &s.workload_namespace)?;
    ensure_namespace(api, &s.system_namespace)?;
    let nodes = create_nodes(api, s, &mut rep)?;
    let owners = Owners {
        daemonsets: create_daemonsets(api, s, &mut rep)?,
        replicasets: create_spread_replicasets(api, s, &mut rep)?,
        cache: create_cache_replicaset(api, s, &mut rep)?,
    };
    rep.pods = seed_pods(api, s, &owners, &nodes)?;
    Ok(rep)
}

/// A seeded node: its name, uid and IP.
type SeededNode = (String, String, String);

fn create_nodes(
    api: &Api,
    s: &Scenario,
    rep: &mut ScenarioReport,
) -> Result<Vec<SeededNode>, SimError> {
    let nodes = api.def(names::NODES)?;
    let mut seeded = Vec::new();
    for i in 0..s.nodes {
        let name = s.node_name(i);
        let mut v = node(&name, i);
        for (key, value) in &s.node_labels {
            v["metadata"]["labels"][key] = json!(value);
        }
        let ip = v["status"]["addresses"][0]["address"]
            .as_str()
            .unwrap_or("10.0.0.1")
            .to_string();
        let o = api.create(&nodes, "", v, false, true)?;
        seeded.push((name.clone(), o.uid.clone(), ip));
        rep.nodes.push(name);
    }
    Ok(seeded)
}

/// The controllers the seeded pods belong to.
struct Owners {
    /// (name, uid) of each DaemonSet.
    daemonsets: Vec<(String, String)>,
    /// (name, uid, app, pod template hash) of each spread ReplicaSet.
    replicasets: Vec<(String, String, String, String)>,
    /// (name, uid) of the emptyDir pods' ReplicaSet, if the scenario has them.
    cache: Option<(String, String)>,
}

fn create_daemonsets(
    api: &Api,
    s: &Scenario,
    rep: &mut ScenarioReport,
) -> Result<Vec<(String, String)>, SimError> {
    let dsd = api.def(names::DAEMONSETS)?;
    let system_ns = s.system_namespace.as_str();
    let mut created = Vec::new();
    for d in 0..s.daemonsets {
        let name = format!("node-agent-{d}");
        let o = api.create(&dsd, system_ns, daemonset(s, &name), false, false)?;
        created.push((name.clone(), o.uid.clone()));
        rep.daemonsets.push((system_ns.into(), name));
    }
    Ok(created)
}

/// The spread ReplicaSets (their replicas shared out over all nodes), each with its budget.
fn create_spread_replicasets(
    api: &Api,
    s: &Scenario,
    rep: &mut ScenarioReport,
) -> Result<Vec<(String, String, String, String)>, SimError> {
    let rsd = api.def(names::REPLICASETS)?;
    let pdbd = api.def(names::PDBS)?;
    let workload_ns = s.workload_namespace.as_str();
    let (_, spread, rs_count) = s.layout();
    let total_spread = spread * s.nodes;
    let mut created = Vec::new();
    for r in 0..rs_count {
        let (app, hash, name) = spread_replicaset(r);
        let replicas = total_spread / rs_count + usize::from(r < total_spread % rs_count);
        let o = api.create(
            &rsd,
            workload_ns,
            replicaset(s, &name, &app, &hash, replicas, false),
            false,
            false,
        )?;
        created.push((name.clone(), o.uid.clone(), app.clone(), hash));
        rep.replicasets.push((workload_ns.into(), name));
        if let Some(pdb) = pdb(s, &app) {
            api.create(&pdbd, workload_ns, pdb, false, false)?;
            rep.pdbs.push((workload_ns.into(), format!("{app}-pdb")));
        }
    }
    Ok(created)
}

/// The ReplicaSet of the emptyDir pods (one a node), if the scenario has them.
fn create_cache_replicaset(
    api: &Api,
    s: &Scenario,
    rep: &mut ScenarioReport,
) -> Result<Option<(String, String)>, SimError> {
    if !s.emptydir_pods || s.nodes == 0 {
        return Ok(None);
    }
    let rsd = api.def(names::REPLICASETS)?;
    let workload_ns = s.workload_namespace.as_str();
    let name = CACHE_REPLICASET.to_string();
    let o = api.create(
        &rsd,
        workload_ns,
        replicaset(s, &name, "cache", CACHE_HASH, s.nodes, true),
        false,
        false,
    )?;
    rep.replicasets.push((workload_ns.into(), name.clone()));
    Ok(Some((name, o.uid.clone())))
}

/// Seeds every node's pods; returns how many.
fn seed_pods(
    api: &Arc<Api>,
    s: &Scenario,
    owners: &Owners,
    nodes: &[SeededNode],
) -> Result<usize, SimError> {
    let pods = api.def(names::PODS)?;
    // Pods are seeded from two threads (serialization happens outside the store lock).
    let threads = 2usize;
    let per = nodes.len().div_ceil(threads).max(1);
    let seeded: Vec<Result<usize, SimError>> = std::thread::scope(|sc| {
        let handles: Vec<_> = nodes
            .iter()
            .enumerate()
            .collect::<Vec<_>>()
            .chunks(per)
            .map(|chunk| {
                let chunk: Vec<(usize, &SeededNode)> = chunk.to_vec();
                let pods = &pods;
                sc.spawn(move || -> Result<usize, SimError> {
                    let first = chunk.first().map_or(0, |c| c.0 * 1000);
                    let mut seeder = Seeder::new(api, pods, s, owners, first);
                    for (ni, node) in chunk {
                        seeder.seed_node(ni, node)?;
                    }
                    Ok(seeder.made)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(SimError::Config("seeding thread panicked".into())))
            })
            .collect()
    });
    let mut made = 0;
    for r in seeded {
        made += r?;
    }
    Ok(made)
}

/// One seeding thread: the pods it made, the pod specs it built, its name counter.
struct Seeder<'a> {
    api: &'a Api,
    pods: &'a Arc<crate::resources::ResourceDef>,
    s: &'a Scenario,
    owners: &'a Owners,
    specs: HashMap<(String, bool), Value>,
    suffixes: Suffixes,
    made: usize,
}

impl<'a> Seeder<'a> {
    fn new(
        api: &'a Api,
        pods: &'a Arc<crate::resources::ResourceDef>,
        s: &'a Scenario,
        owners: &'a Owners,
        counter: usize,
    ) -> Self {
        Seeder {
            api,
            pods,
            s,
            owners,
            specs: HashMap::new(),
            suffixes: Suffixes::starting_at(counter),
            made: 0,
        }
    }

    /// The pod spec of `app` (built once).
    fn spec(&mut self, app: &str, emptydir: bool) -> Value {
        self.specs
            .entry((app.to_string(), emptydir))
            .or_insert_with(|| pod_spec(app, emptydir))
            .clone()
    }

    /// The next name suffix.
    fn next(&mut self) -> String {
        self.suffixes.next()
    }

    fn create(&mut self, ns: &str, pod: Value) -> Result<(), SimError> {
        self.api.create(self.pods, ns, pod, false, true)?;
        self.made += 1;
        Ok(())
    }

    /// The pods of node `ni`: one per DaemonSet, the special ones, then its spread pods.
    fn seed_node(&mut self, ni: usize, node: &SeededNode) -> Result<(), SimError> {
        let s = self.s;
        let owners = self.owners;
        for (dname, duid) in &owners.daemonsets {
            self.daemonset_pod(node, dname, duid)?;
        }
        if s.mirror_pods {
            self.mirror_pod(node)?;
        }
        if let Some((cname, cuid)) = &owners.cache {
            self.cache_pod(node, cname, cuid)?;
        }
        if s.unmanaged_pods {
            self.unmanaged_pod(node)?;
        }
        if s.finished_pods {
            self.finished_pod(node)?;
        }
        let (_, spread, rs_count) = s.layout();
        for k in 0..spread {
            // Spread: consecutive pods of a node belong to different ReplicaSets.
            let (rname, ruid, app, hash) = &owners.replicasets[(ni * spread + k) % rs_count];
            let v = running_pod(
                &format!("{rname}-{}", self.next()),
                &s.workload_namespace,
                &node.0,
                &node.2,
                json!({"app": app, "pod-template-hash": hash}),
                Some(owner("ReplicaSet", "apps/v1", rname, ruid)),
                self.spec(app, false),
            );
            self.create(&s.workload_namespace, v)?;
        }
        Ok(())
    }

    fn daemonset_pod(
        &mut self,
        node: &SeededNode,
        dname: &str,
        duid: &str,
    ) -> Result<(), SimError> {
        let system_ns = &self.s.system_namespace;
        let v = running_pod(
            &format!("{dname}-{}", self.next()),
            system_ns,
            &node.0,
            &node.2,
            json!({"app": dname, "controller-revision-hash": "6d4f8b9c7"}),
            Some(owner("DaemonSet", "apps/v1", dname, duid)),
            self.spec(dname, false),
        );
        self.create(system_ns, v)
    }

    /// A static pod's mirror, owned by its Node.
    fn mirror_pod(&mut self, (node_name, node_uid, ip): &SeededNode) -> Result<(), SimError> {
        let system_ns = &self.s.system_namespace;
        let mut v = running_pod(
            &format!("static-web-{node_name}"),
            system_ns,
            node_name,
            ip,
            json!({"component": "static-web", "tier": "node"}),
            Some(
                json!({"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid, "controller": true}),
            ),
            self.spec("static-web", false),
        );
        v["metadata"]["annotations"] = json!({
            "kubernetes.io/config.hash": hexs(32), "kubernetes.io/config.mirror": hexs(32),
            "kubernetes.io/config.seen": now_rfc3339(), "kubernetes.io/config.source": "file"
        });
        self.create(system_ns, v)
    }

    /// A pod with an emptyDir volume.
    fn cache_pod(&mut self, node: &SeededNode, cname: &str, cuid: &str) -> Result<(), SimError> {
        let workload_ns = &self.s.workload_namespace;
        let v = running_pod(
            &format!("{cname}-{}", self.next()),
            workload_ns,
            &node.0,
            &node.2,
            json!({"app": "cache", "pod-template-hash": "6b7c9d8f5e"}),
            Some(owner("ReplicaSet", "apps/v1", cname, cuid)),
            self.spec("cache", true),
        );
        self.create(workload_ns, v)
    }

    /// A pod no controller owns.
    fn unmanaged_pod(&mut self, (node_name, _, ip): &SeededNode) -> Result<(), SimError> {
        let workload_ns = &self.s.workload_namespace;
        let v = running_pod(
            &format!("standalone-{node_name}"),
            workload_ns,
            node_name,
            ip,
            json!({"app": "standalone"}),
            None,
            self.spec("standalone", false),
        );
        self.create(workload_ns, v)
    }

    /// A pod whose containers completed (Succeeded).
    fn finished_pod(&mut self, (node_name, _, ip): &SeededNode) -> Result<(), SimError> {
        let workload_ns = &self.s.workload_namespace;
        let mut v = running_pod(
            &format!("batch-{node_name}"),
            workload_ns,
            node_name,
            ip,
            json!({"app": "batch"}),
            None,
            self.spec("batch", false),
        );
        finish(&mut v);
        self.create(workload_ns, v)
    }
}

/// Makes a running pod one that ran to completion (`restartPolicy: Never`, Succeeded).
fn finish(v: &mut Value) {
    v["spec"]["restartPolicy"] = json!("Never");
    completed(&mut v["status"], &now_rfc3339());
}

/// A running pod's status made that of a pod whose containers completed at `now`.
pub(crate) fn completed(status: &mut Value, now: &str) {
    status["phase"] = json!("Succeeded");
    if let Some(conds) = status["conditions"].as_array_mut() {
        for c in conds.iter_mut() {
            if c["type"] == "Ready" || c["type"] == "ContainersReady" {
                c["status"] = json!("False");
                c["reason"] = json!("PodCompleted");
            }
        }
    }
    if let Some(cs) = status["containerStatuses"].as_array_mut() {
        for c in cs.iter_mut() {
            c["ready"] = json!(false);
            c["started"] = json!(false);
            c["state"] = json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}});
        }
    }
}

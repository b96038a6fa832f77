//! The real kubectl against the simulator: get with server-side tables, field selectors, CRD
//! apply, NodeMaintenance, drain (with and without a blocking PDB).

use nmo_sim::{Scenario, SimConfig, Simulator};
use serde_json::json;

use crate::support::{Kubectl, start};

fn rows(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

#[tokio::test]
async fn kubectl_get_nodes_and_pods_prints_real_columns() {
    let sim = start(Some(Scenario::new(3, 8)), 0.0).await;
    let Some(k) = Kubectl::new(&sim) else { return };
    let o = k.run(&["cordon", "node-2"]).await;
    assert!(o.ok, "{o:?}");
    let o = k.run(&["get", "nodes"]).await;
    assert!(o.ok, "{o:?}");
    let r = rows(&o.stdout);
    assert_eq!(r[0], ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]);
    assert_eq!(r.len(), 4);
    assert_eq!(r[1][..3], ["node-0", "Ready", "<none>"]);
    assert_eq!(r[3][1], "Ready,SchedulingDisabled");
    assert_eq!(r[1][4], "v1.33.0");

    let o = k
        .run_words("get pods -A --field-selector spec.nodeName=node-1 -o wide")
        .await;
    assert!(o.ok, "{o:?}");
    let r = rows(&o.stdout);
    assert_eq!(
        r[0][..6],
        ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    );
    assert_eq!(r.len(), 9, "{}", o.stdout);
    assert!(r[1..].iter().all(|row| row[7] == "node-1"), "{}", o.stdout);
    assert!(
        r.iter()
            .any(|row| row[1] == "batch-node-1" && row[3] == "Completed" && row[2] == "0/1")
    );
    assert!(
        r.iter()
            .any(|row| row[1] == "standalone-node-1" && row[3] == "Running" && row[2] == "1/1")
    );

    let o = k
        .run(&["get", "pods", "-A", "--field-selector", "spec.bogus=1"])
        .await;
    assert!(!o.ok);
    assert!(
        o.stderr.contains("field label not supported: spec.bogus"),
        "{o:?}"
    );

    let o = k.run(&["get", "pdb", "-n", "workloads"]).await;
    assert!(o.ok, "{o:?}");
    assert_eq!(
        rows(&o.stdout)[0],
        [
            "NAME",
            "MIN",
            "AVAILABLE",
            "MAX",
            "UNAVAILABLE",
            "ALLOWED",
            "DISRUPTIONS",
            "AGE"
        ]
    );
    let o = k.run(&["get", "nm"]).await;
    assert!(o.ok, "{o:?}");
    assert!(o.stderr.contains("No resources found"), "{o:?}");
    sim.shutdown().await;
}

#[tokio::test]
async fn kubectl_applies_a_crd_then_a_nodemaintenance() {
    let mut cfg = SimConfig::default().scenario(Scenario::plain(1, 0));
    cfg.timing.time_scale = 0.0;
    let sim = Simulator::start(cfg).await.unwrap();
    let Some(k) = Kubectl::new(&sim) else { return };
    // The CRD nmo ships: deploy/base/crd.yaml is `nmo crd`'s output (a test checks that).
    let crd = crate::support::NM_CRD_PATH;
    let o = k.run(&["apply", "--dry-run=client", "-f", crd]).await;
    assert!(o.ok, "{o:?}");
    assert!(o.stdout.contains("(dry run)"), "{o:?}");
    let o = k.run(&["apply", "-f", crd]).await;
    assert!(o.ok, "{o:?}");
    assert!(o.stdout.contains("customresourcedefinition.apiextensions.k8s.io/nodemaintenances.nodemaintenance.medik8s.io created"), "{o:?}");
    let o = k
        .run_words("wait --for=condition=Established crd/nodemaintenances.nodemaintenance.medik8s.io --timeout=10s")
        .await;
    assert!(o.ok, "{o:?}");
    let nm = k.file("nm.yaml", "apiVersion: nodemaintenance.medik8s.io/v1beta1\nkind: NodeMaintenance\nmetadata:\n  name: nm-node-0\nspec:\n  nodeName: node-0\n  reason: kernel upgrade\n");
    let o = k.run(&["apply", "-f", nm.to_str().unwrap()]).await;
    assert!(o.ok, "{o:?}");
    assert!(
        o.stdout
            .contains("nodemaintenance.nodemaintenance.medik8s.io/nm-node-0 created"),
        "{o:?}"
    );
    let o = k.run(&["apply", "-f", nm.to_str().unwrap()]).await;
    assert!(o.stdout.contains("unchanged"), "{o:?}");
    // Unknown fields are refused (kubectl asks for strict field validation).
    let bad = k.file("bad.yaml", "apiVersion: nodemaintenance.medik8s.io/v1beta1\nkind: NodeMaintenance\nmetadata:\n  name: nm-bad\nspec:\n  nodeName: node-0\n  bogus: 1\n");
    let o = k.run(&["apply", "-f", bad.to_str().unwrap()]).await;
    assert!(!o.ok);
    assert!(
        o.stderr
            .contains("strict decoding error: unknown field \"spec.bogus\""),
        "{o:?}"
    );
    // Status through the subresource, shown in the printer columns.
    let o = k
        .run(&[
            "patch",
            "nm",
            "nm-node-0",
            "--subresource=status",
            "--type=merge",
            "-p",
            &json!({"status": {"phase": "Running", "drainProgress": 40}}).to_string(),
        ])
        .await;
    assert!(o.ok, "{o:?}");
    let o = k.run(&["get", "nm"]).await;
    let r = rows(&o.stdout);
    assert_eq!(r[0], ["NAME", "NODE", "PHASE", "PROGRESS", "REASON", "AGE"]);
    assert_eq!(r[1][..4], ["nm-node-0", "node-0", "Running", "40"]);
    let o = k
        .run_words(
            "get nodemaintenances.nodemaintenance.medik8s.io nm-node-0 -o jsonpath={.spec.reason}",
        )
        .await;
    assert_eq!(o.stdout, "kernel upgrade");
    // A strategic merge patch on a custom resource is refused, as on a real cluster.
    let o = k
        .run_words("patch nm nm-node-0 --type=strategic -p {\"spec\":{\"reason\":\"x\"}}")
        .await;
    assert!(!o.ok);
    assert!(
        o.stderr.contains("UnsupportedMediaType")
            || o.stderr.contains("unknown format")
            || o.stderr.contains("strategic merge patch"),
        "{o:?}"
    );
    let o = k.run(&["delete", "nm", "nm-node-0"]).await;
    assert!(o.ok, "{o:?}");
    let o = k.run(&["get", "nm", "-o", "name"]).await;
    assert_eq!(o.stdout.trim(), "");
    sim.shutdown().await;
}

#[tokio::test]
async fn kubectl_drain_evicts_and_reports_blocking_pdbs() {
    let sim = start(Some(Scenario::new(3, 8)), 0.02).await;
    let Some(k) = Kubectl::new(&sim) else { return };
    let o = k
        .run_words("drain node-1 --ignore-daemonsets --delete-emptydir-data --force --timeout=30s")
        .await;
    assert!(o.ok, "{o:?}");
    assert!(o.stdout.contains("node/node-1 drained"), "{o:?}");
    assert!(
        o.stdout
            .contains("evicting pod workloads/standalone-node-1"),
        "{o:?}"
    );
    let left: Vec<String> = sim
        .list_json("", "pods", "")
        .into_iter()
        .filter(|p| p["spec"]["nodeName"] == "node-1")
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        left.len(),
        2,
        "only the DaemonSet and mirror pods stay: {left:?}"
    );
    assert!(left.iter().any(|n| n.starts_with("static-web")));
    assert_eq!(
        sim.get_json("", "nodes", "", "node-1").unwrap()["spec"]["unschedulable"],
        true
    );
    // A PDB that allows nothing: drain reports the real refusal and times out.
    let o = k
        .run_words(
            "-n workloads patch pdb app-0-pdb --type=merge -p {\"spec\":{\"maxUnavailable\":0}}",
        )
        .await;
    assert!(o.ok, "{o:?}");
    let o = k
        .run_words("drain node-2 --ignore-daemonsets --delete-emptydir-data --force --timeout=3s")
        .await;
    assert!(!o.ok);
    let all = format!("{}{}", o.stdout, o.stderr);
    assert!(
        all.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{all}"
    );
    assert!(all.contains("error when evicting pods/\"app-0-"), "{all}");
    sim.shutdown().await;
}

//! `nmo plan` against a cluster: each blocker it predicts, what it says of each pod, that it
//! changes nothing, and its exit status, on both backends: the plans are made through the
//! library with the admin client, and by the `nmo` binary with the admin's kubeconfig.

use std::path::Path;
use std::process::Output;

use nmo::plan::{Blocker, PlanRequest, plan};
use serde_json::{Value, json};

use crate::support::{Backend, TestEnv, both_backends};

/// A plan for the nodes the test named (as the cluster names them).
fn request(env: &TestEnv, nodes: &[&str]) -> PlanRequest {
    PlanRequest {
        nodes: nodes.iter().map(|n| env.name(n)).collect(),
        selector: None,
    }
}

/// Runs the `nmo` binary against the environment's cluster, as its admin (node names in
/// `args` are the cluster's: `env.name(..)`).
fn nmo_plan(env: &TestEnv, dir: &Path, args: &[&str]) -> Output {
    let kubeconfig = dir.join("kubeconfig");
    env.write_admin_kubeconfig(&kubeconfig);
    std::process::Command::new(env!("CARGO_BIN_EXE_nmo"))
        .arg("plan")
        .args(args)
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .expect("nmo runs")
}

async fn two_web_pods(backend: Backend) -> TestEnv {
    TestEnv::on(backend)
        .nodes(3, 0)
        .without_operator()
        .namespace_with_pods("shop", "web", &[("web-0", "node-0"), ("web-1", "node-1")])
        .start()
        .await
}

/// Waits for the simulator's disruption controller to fill in a PDB's status.
async fn pdb_counted(env: &TestEnv, name: &str) {
    crate::support::eventually(
        &format!("the status of PodDisruptionBudget {name}"),
        std::time::Duration::from_secs(10),
        async || {
            env.get_json::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(Some("shop"), name)
                .await
                .is_some_and(|pdb| pdb["status"]["expectedPods"].as_i64() == Some(2))
        },
    )
    .await;
}

async fn a_pdb_that_never_allows_a_disruption_is_predicted_and_exits_3(backend: Backend) {
    let env = two_web_pods(backend).await;
    env.create_pdb("shop", "web", "web", 2).await;
    pdb_counted(&env, "web").await;
    let before = env.node("node-0").await;
    let (node, shop) = (env.name("node-0"), env.ns("shop"));
    let plan = plan(&env.admin_client(), &request(&env, &["node-0"]))
        .await
        .expect("a plan");
    assert_eq!(
        plan.blockers,
        [Blocker::StructuralBudget {
            pdb: format!("{shop}/web"),
            why: "minAvailable 2 covers all 2 expected pods: it never allows a disruption".into(),
            pods: vec![format!("{shop}/web-0")],
        }]
    );
    let web = &plan.nodes[0].pods[0];
    assert_eq!(
        (web.name.as_str(), web.pdbs[0].disruptions_allowed),
        ("web-0", 0)
    );

    let dir = tempfile::tempdir().expect("a scratch directory");
    let output = nmo_plan(&env, dir.path(), &[&node]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains(&format!("node {node} (Ready)")), "{stdout}");
    assert!(
        stdout.contains(&format!("{shop}/web-0  evict   {shop}/web (0, 1)")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "PodDisruptionBudget {shop}/web: minAvailable 2 covers all 2 expected pods"
        )),
        "{stdout}"
    );
    // It changed nothing.
    assert_eq!(env.node("node-0").await["spec"], before["spec"]);
    assert!(env.pod_exists("shop", "web-0").await);
}
both_backends!(a_pdb_that_never_allows_a_disruption_is_predicted_and_exits_3);

async fn a_pod_under_two_pdbs_is_predicted(backend: Backend) {
    let env = two_web_pods(backend).await;
    env.create_pdb("shop", "web", "web", 0).await;
    env.create_pdb("shop", "web-again", "web", 0).await;
    pdb_counted(&env, "web").await;
    let plan = plan(&env.admin_client(), &request(&env, &["node-1"]))
        .await
        .expect("a plan");
    assert_eq!(
        plan.blockers,
        [Blocker::SeveralBudgets {
            pod: format!("{}/web-1", env.ns("shop")),
            pdbs: vec![
                format!("{}/web", env.ns("shop")),
                format!("{}/web-again", env.ns("shop")),
            ],
        }]
    );
}
both_backends!(a_pod_under_two_pdbs_is_predicted);

async fn replacements_with_nowhere_to_go_are_a_cross_node_deadlock(backend: Backend) {
    // Three nodes, three ReplicaSets spread one pod per node, each under maxUnavailable: 1.
    let env = TestEnv::on(backend).budgeted_nodes(3, 3).start_idle().await;
    let dir = tempfile::tempdir().expect("a scratch directory");
    // One node at a time: the PDBs allow one each, the others take the replacements.
    let one = nmo_plan(&env, dir.path(), &[&env.name("node-0"), "-o", "json"]);
    let value: Value = serde_json::from_slice(&one.stdout).expect("JSON");
    assert_eq!(one.status.code(), Some(0), "{value:#}");
    assert_eq!(value["blocked"], false);
    let pods = value["nodes"][0]["pods"].as_array().expect("pods");
    assert_eq!(pods.len(), 3);
    assert!(pods.iter().all(|p| p["action"] == "evict"), "{value:#}");
    assert!(
        pods.iter()
            .all(|p| p["budgets"][0]["disruptionsAllowed"] == 1),
        "{value:#}"
    );
    // All three together (by label: a real cluster has the test's nodes only, earlier tests'
    // are gone): nowhere left for the replacements.
    let all = nmo_plan(
        &env,
        dir.path(),
        &["--selector", "kubernetes.io/os=linux", "-o", "json"],
    );
    let value: Value = serde_json::from_slice(&all.stdout).expect("JSON");
    assert_eq!(all.status.code(), Some(3), "{value:#}");
    let nodes: Vec<&str> = value["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node"].as_str().unwrap())
        .collect();
    let names: Vec<String> = ["node-0", "node-1", "node-2"]
        .iter()
        .map(|n| env.name(n))
        .collect();
    assert_eq!(nodes, names);
    let blockers = value["blockers"].as_array().expect("blockers");
    assert_eq!(blockers.len(), 3, "one per budget: {value:#}");
    for blocker in blockers {
        assert_eq!(blocker["kind"], "nowhereToGo");
        assert!(
            blocker["message"]
                .as_str()
                .unwrap()
                .contains("no schedulable node is left once these 3 nodes are cordoned together"),
            "{blocker}"
        );
    }
}
both_backends!(replacements_with_nowhere_to_go_are_a_cross_node_deadlock);

async fn two_control_plane_nodes_together_are_a_quorum_problem(backend: Backend) {
    let env = TestEnv::on(backend).nodes(3, 0).start_idle().await;
    for node in ["node-0", "node-1"] {
        env.patch_node(
            node,
            json!({"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}}),
        )
        .await;
    }
    let alone = plan(&env.admin_client(), &request(&env, &["node-0"]))
        .await
        .expect("a plan");
    assert!(alone.clear(), "{:?}", alone.blockers);
    let together = plan(&env.admin_client(), &request(&env, &["node-0", "node-1"]))
        .await
        .expect("a plan");
    let [Blocker::Quorum { node, message }] = together.blockers.as_slice() else {
        panic!("{:?}", together.blockers);
    };
    assert_eq!(*node, env.name("node-1"));
    assert!(
        message.contains(&format!(
            "control-plane node {} is already in maintenance",
            env.name("node-0")
        )),
        "{message}"
    );
    assert!(message.contains("may violate etcd quorum"), "{message}");
}
both_backends!(two_control_plane_nodes_together_are_a_quorum_problem);

async fn no_plan_is_an_error_with_its_own_exit_status(backend: Backend) {
    let env = two_web_pods(backend).await;
    let dir = tempfile::tempdir().expect("a scratch directory");
    let nothing = nmo_plan(&env, dir.path(), &[]);
    assert_eq!(nothing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&nothing.stderr).contains("no node to plan for"));
    // A node that does not exist is a blocker, not an error: its NodeMaintenance is refused.
    let ghost = nmo_plan(&env, dir.path(), &["ghost"]);
    assert_eq!(ghost.status.code(), Some(3));
    // No cluster at the other end.
    let unreachable = std::process::Command::new(env!("CARGO_BIN_EXE_nmo"))
        .args(["plan", "node-0", "--kubeconfig"])
        .arg(dir.path().join("missing"))
        .output()
        .expect("nmo runs");
    assert_eq!(unreachable.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unreachable.stderr).contains("cannot use the kubeconfig"));
}
both_backends!(no_plan_is_an_error_with_its_own_exit_status);

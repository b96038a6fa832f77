//! deploy/components/monitoring: the ServiceMonitor scrapes nmo's metrics Service, and every
//! alert is valid PromQL over nmo's metrics, with the labels its text uses.

use std::collections::BTreeSet;

use promql_parser::parser::{self, Expr};
use promql_parser::util::{ExprVisitor, walk_expr};
use serde_json::Value;

use super::support::{build_overlay, find, find_all};

/// The metric selectors of an expression: (metric name, label names it matches on).
#[derive(Default)]
struct Selectors(Vec<(String, Vec<String>)>);

impl ExprVisitor for Selectors {
    type Error = String;

    fn pre_visit(&mut self, expr: &Expr) -> Result<bool, String> {
        let selector = match expr {
            Expr::VectorSelector(selector) => Some(selector),
            Expr::MatrixSelector(matrix) => Some(&matrix.vs),
            _ => None,
        };
        if let Some(selector) = selector {
            let labels = selector
                .matchers
                .matchers
                .iter()
                .map(|m| m.name.clone())
                .collect();
            self.0
                .push((selector.name.clone().unwrap_or_default(), labels));
        }
        Ok(true)
    }
}

fn selectors(expr: &str) -> Result<Vec<(String, Vec<String>)>, String> {
    let parsed = parser::parse(expr)?;
    let mut found = Selectors::default();
    walk_expr(&mut found, &parsed)?;
    Ok(found.0)
}

fn monitoring() -> Vec<Value> {
    build_overlay(
        &["deploy/base", "deploy/webhook"],
        &["deploy/components/monitoring"],
    )
}

#[test]
fn the_service_monitor_scrapes_the_metrics_service() {
    let objects = monitoring();
    let monitor = find(&objects, "ServiceMonitor", "nmo");
    let wanted = monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels");
    let services: Vec<&Value> = find_all(&objects, "Service")
        .into_iter()
        .filter(|s| {
            s["metadata"]["namespace"] == monitor["metadata"]["namespace"]
                && wanted.iter().all(|(k, v)| &s["metadata"]["labels"][k] == v)
        })
        .collect();
    assert_eq!(
        services.len(),
        1,
        "exactly the metrics Service: {services:?}"
    );
    let service = services[0];
    assert_eq!(service["metadata"]["name"], "nmo-metrics");
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert!(
        service["spec"]["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .any(|p| p["name"] == endpoint["port"])
    );
    assert_eq!(endpoint["path"], "/metrics");
}

#[test]
fn every_alert_is_valid_promql_over_nmo_metrics() {
    let objects = monitoring();
    let rule = find(&objects, "PrometheusRule", "nmo");
    let alerts: Vec<&Value> = rule["spec"]["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules"))
        .collect();
    let mut metrics_by_alert = Vec::new();
    for alert in &alerts {
        let name = alert["alert"].as_str().expect("alerting rules only");
        let expr = alert["expr"].as_str().expect("an expression");
        let used = selectors(expr).unwrap_or_else(|e| panic!("{name}: {expr}: {e}"));
        assert!(!used.is_empty(), "{name} reads no metric");
        // That nmo serves each metric read: every_query_and_alert_reads_a_metric_nmo_serves.
        assert!(
            ["warning", "critical"].contains(&alert["labels"]["severity"].as_str().unwrap_or("")),
            "{name} has no severity"
        );
        for text in ["summary", "description"] {
            let text = alert["annotations"][text]
                .as_str()
                .unwrap_or_else(|| panic!("{name} has no {text}"));
            // Only labels the series carry can fill the text in.
            for label in text.split("$labels.").skip(1).map(|rest| {
                rest.split(|c: char| !c.is_alphanumeric() && c != '_')
                    .next()
            }) {
                let label = label.unwrap_or_default();
                assert!(
                    KNOWN_LABELS.contains(&label),
                    "{name} shows the unknown label {label}"
                );
            }
        }
        metrics_by_alert.push((name.to_string(), used));
    }
    let reads = |metric: &str| -> BTreeSet<String> {
        metrics_by_alert
            .iter()
            .filter(|(_, used)| used.iter().any(|(m, _)| m == metric))
            .map(|(name, _)| name.clone())
            .collect()
    };
    // The three alerts of issue 14: a drain blocked for over an hour, no leader, failures.
    assert_eq!(reads("nmo_maintenance_blocked_since_seconds").len(), 1);
    let stuck = alerts
        .iter()
        .find(|a| a["expr"].as_str().unwrap_or("").contains("blocked_since"))
        .expect("the stuck-drain alert");
    assert!(stuck["expr"].as_str().unwrap_or("").contains("3600"));
    assert_eq!(reads("nmo_leader").len(), 1);
    let failed = metrics_by_alert
        .iter()
        .flat_map(|(_, used)| used)
        .find(|(m, _)| m == "nmo_maintenances")
        .expect("an alert on failed maintenances");
    assert!(failed.1.contains(&"phase".to_string()));
}

/// Labels of nmo's metrics that an alert's text may show.
const KNOWN_LABELS: &[&str] = &["node", "nodemaintenance", "phase"];

#[test]
fn a_broken_expression_is_caught() {
    assert!(selectors("sum(nmo_leader < 1").is_err());
    assert_eq!(
        selectors(r#"sum(nmo_maintenances{phase="Failed"}) > 0"#).expect("valid"),
        vec![("nmo_maintenances".to_string(), vec!["phase".to_string()])]
    );
}

/// Every expression of the dashboard's panels and of the alerts, with where it comes from.
fn dashboard_and_alert_expressions() -> Vec<(String, String)> {
    fn collect(value: &Value, at: &str, out: &mut Vec<(String, String)>) {
        match value {
            Value::Object(map) => {
                let title = map.get("title").and_then(Value::as_str).unwrap_or(at);
                for (key, value) in map {
                    match (key.as_str(), value) {
                        ("expr", Value::String(expr)) => {
                            out.push((title.to_string(), expr.clone()))
                        }
                        _ => collect(value, title, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| collect(item, at, out)),
            _ => {}
        }
    }
    let dir = super::support::repo().join("deploy/components/monitoring");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("dashboard.json")).expect("read"))
            .expect("the dashboard is JSON");
    let rule: Value = serde_yaml::from_str(
        &std::fs::read_to_string(dir.join("prometheusrule.yaml")).expect("read"),
    )
    .expect("the rule is YAML");
    let mut found = Vec::new();
    collect(&dashboard, "dashboard", &mut found);
    let panels = found.len();
    assert!(panels >= 10, "the dashboard has {panels} queries");
    collect(&rule, "rule", &mut found);
    assert!(found.len() > panels, "the rule has alerts");
    found
}

/// The sample names a scrape serves: those of its samples, and those its `# TYPE` lines
/// declare (a counter's `_total`, a histogram's `_bucket`, `_sum`, `_count`), so that a family
/// with no sample yet (no error so far, say) counts as served.
fn served(scrape: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in scrape.lines() {
        if let Some(declared) = line.strip_prefix("# TYPE ") {
            let mut parts = declared.split_whitespace();
            let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
                continue;
            };
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                "info" => &["_info"],
                _ => &[""],
            };
            names.extend(suffixes.iter().map(|suffix| format!("{name}{suffix}")));
        } else if !line.starts_with('#') {
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            names.insert(name.to_string());
        }
    }
    names
}

/// nmo running with leader election on the simulated cluster, a drain held up by a budget:
/// every metric the dashboard's queries and the alerts read is one its `/metrics` serves,
/// controller-runtime's families included. (A family with labels is served from its first
/// series on: the blocked drain gives `nmo_maintenance_blocked_since_seconds` one, and its
/// answered evictions `nmo_evictions_total`, which may be counted a moment after the drain shows
/// blocked.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_query_and_alert_reads_a_metric_nmo_serves() {
    let metrics_at = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port");
    let options = nmo::operator::OperatorOptions {
        leader_elect: true,
        metrics_bind_address: metrics_at.to_string(),
        metrics_secure: false,
        ..crate::support::test_options()
    };
    let env = crate::support::TestEnv::builder()
        .scenario(nmo_sim::Scenario::plain(1, 2).pdb(None))
        .precious_pods(&["db-0"], 1)
        .operator_options(options)
        .start()
        .await;
    env.create_maintenance("nm-0", "node-0").await;
    let mut scrape = String::new();
    crate::support::eventually(
        "the drain to show blocked",
        std::time::Duration::from_secs(30),
        async || {
            if tokio::net::TcpStream::connect(metrics_at).await.is_err() {
                return false;
            }
            let (status, text) = crate::obs_support::http_get(metrics_at, "/metrics").await;
            scrape = text;
            status == 200
                && scrape.contains("nmo_maintenance_blocked_since_seconds{")
                && scrape.contains("nmo_evictions_total{")
        },
    )
    .await;
    // The watch's work queue: everything it handed the supervisor was handled.
    let queue = "workqueue_depth{controller=\"nodemaintenance\",name=\"nodemaintenance\"}";
    crate::support::eventually(
        "the watch's queue to drain",
        std::time::Duration::from_secs(10),
        async || {
            let (_, text) = crate::obs_support::http_get(metrics_at, "/metrics").await;
            crate::metrics::sample(&text, queue) == Some(0.0)
                && crate::metrics::sample(
                    &text,
                    "workqueue_adds_total{controller=\"nodemaintenance\",name=\"nodemaintenance\"}",
                )
                .is_some_and(|adds| adds >= 2.0)
        },
    )
    .await;
    let served = served(&scrape);
    for family in [
        "controller_runtime_reconcile_total",
        "workqueue_depth",
        "rest_client_requests_total",
        "leader_election_master_status",
    ] {
        assert!(served.contains(family), "{family} not served:\n{scrape}");
    }
    for (at, expr) in dashboard_and_alert_expressions() {
        let used = selectors(&expr).unwrap_or_else(|e| panic!("{at}: {expr}: {e}"));
        assert!(!used.is_empty(), "{at} reads no metric: {expr}");
        for (metric, _) in used {
            assert!(
                served.contains(&metric),
                "{at} reads {metric}, which nmo does not serve: {expr}"
            );
        }
    }
}

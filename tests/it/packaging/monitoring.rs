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
        if let Expr::VectorSelector(selector) = expr {
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
        for (metric, _) in &used {
            assert!(metric.starts_with("nmo_"), "{name} reads {metric}");
        }
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

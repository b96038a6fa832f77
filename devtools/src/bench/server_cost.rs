//! What a scenario costs the real control plane itself (`nmo bench --backend real`): the CPU
//! time of kube-apiserver and etcd, read from /proc for the processes nmo-envtest started, and
//! the requests the API server dispatched and rejected by flow schema and priority level (API
//! Priority and Fairness), read from its `/metrics`. Every client of the control plane is in
//! these figures (the operator or the floor, the kubelet stand-in, the benchmark's tracker,
//! the controllers): they are the price of the whole run, compared between runs of the same
//! scenario.

use std::collections::BTreeMap;
use std::time::Duration;

use nmo_envtest::{Component, ControlPlane};
use serde::Serialize;

use super::error::BenchError;
use super::procstat;

/// Requests the API server dispatched (ran) by (flow schema, priority level).
const DISPATCHED: &str = "apiserver_flowcontrol_dispatched_requests_total";
/// Requests it rejected (answered 429) by (flow schema, priority level, reason).
const REJECTED: &str = "apiserver_flowcontrol_rejected_requests_total";

/// (flow schema, priority level).
type Flow = (String, String);

/// The flow-control counters at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowCounts {
    /// Dispatched requests so far.
    pub dispatched: BTreeMap<Flow, f64>,
    /// Rejected requests so far (every reason summed).
    pub rejected: BTreeMap<Flow, f64>,
}

impl FlowCounts {
    /// The counters in the Prometheus text exposition `text`.
    pub fn parse(text: &str) -> Result<FlowCounts, std::io::Error> {
        let scrape =
            prometheus_parse::Scrape::parse(text.lines().map(|line| Ok(line.to_string())))?;
        let mut counts = FlowCounts::default();
        for sample in scrape.samples {
            let into = match sample.metric.as_str() {
                DISPATCHED => &mut counts.dispatched,
                REJECTED => &mut counts.rejected,
                _ => continue,
            };
            let value = match sample.value {
                prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => v,
                _ => continue,
            };
            let flow = (
                sample.labels.get("flow_schema").unwrap_or("").to_string(),
                sample
                    .labels
                    .get("priority_level")
                    .unwrap_or("")
                    .to_string(),
            );
            *into.entry(flow).or_insert(0.0) += value;
        }
        Ok(counts)
    }
}

/// The control plane's counters at one moment.
#[derive(Debug, Clone)]
pub struct ServerSnapshot {
    apiserver_cpu: Duration,
    etcd_cpu: Duration,
    flows: FlowCounts,
}

/// The CPU time of `component` of `control_plane` so far.
fn component_cpu(
    control_plane: &ControlPlane,
    component: Component,
) -> Result<Duration, BenchError> {
    let pid = control_plane
        .components()
        .into_iter()
        .find(|c| c.component == component)
        .map(|c| c.pid)
        .ok_or_else(|| BenchError::Real(format!("{component} is not running")))?;
    procstat::usage(pid)
        .map(|usage| usage.cpu)
        .map_err(|e| BenchError::Real(format!("{component}: {e}")))
}

/// Reads the CPU times and the flow-control counters now (the scrape itself is one request
/// of the exempt priority level, as the admin it is made by).
pub async fn snapshot(
    control_plane: &ControlPlane,
    admin: &kube::Client,
) -> Result<ServerSnapshot, BenchError> {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .map_err(|e| BenchError::Real(e.to_string()))?;
    let text = tokio::time::timeout(Duration::from_secs(30), admin.request_text(request))
        .await
        .map_err(|_| BenchError::Real("the API server's /metrics did not answer in 30 s".into()))?
        .map_err(|e| BenchError::Real(format!("the API server's /metrics: {e}")))?;
    let flows = FlowCounts::parse(&text)
        .map_err(|e| BenchError::Real(format!("the API server's /metrics: {e}")))?;
    Ok(ServerSnapshot {
        apiserver_cpu: component_cpu(control_plane, Component::ApiServer)?,
        etcd_cpu: component_cpu(control_plane, Component::Etcd)?,
        flows,
    })
}

/// Requests of one flow during a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowRequests {
    /// The FlowSchema that classified them.
    pub flow_schema: String,
    /// Its PriorityLevelConfiguration.
    pub priority_level: String,
    /// Requests dispatched.
    pub dispatched: u64,
    /// Requests rejected with 429 by flow control.
    pub rejected: u64,
}

/// What one run cost the control plane.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerCost {
    /// kube-apiserver's CPU time, seconds.
    pub apiserver_cpu_s: f64,
    /// etcd's CPU time, seconds.
    pub etcd_cpu_s: f64,
    /// Requests by flow, the busiest first (flows without any are left out).
    pub flows: Vec<FlowRequests>,
}

#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a difference of two counters' whole values, clamped at 0"
)]
fn counted(after: &BTreeMap<Flow, f64>, before: &BTreeMap<Flow, f64>, flow: &Flow) -> u64 {
    let delta = after.get(flow).copied().unwrap_or(0.0) - before.get(flow).copied().unwrap_or(0.0);
    delta.max(0.0).round() as u64
}

impl ServerCost {
    /// The cost between two snapshots of the same control plane.
    pub fn between(before: &ServerSnapshot, after: &ServerSnapshot) -> ServerCost {
        let (b, a) = (&before.flows, &after.flows);
        let mut flows: Vec<FlowRequests> = a
            .dispatched
            .keys()
            .chain(a.rejected.keys())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .map(|flow| FlowRequests {
                flow_schema: flow.0.clone(),
                priority_level: flow.1.clone(),
                dispatched: counted(&a.dispatched, &b.dispatched, flow),
                rejected: counted(&a.rejected, &b.rejected, flow),
            })
            .filter(|f| f.dispatched + f.rejected > 0)
            .collect();
        flows.sort_by_key(|f| std::cmp::Reverse(f.dispatched + f.rejected));
        ServerCost {
            apiserver_cpu_s: after
                .apiserver_cpu
                .saturating_sub(before.apiserver_cpu)
                .as_secs_f64(),
            etcd_cpu_s: after.etcd_cpu.saturating_sub(before.etcd_cpu).as_secs_f64(),
            flows,
        }
    }

    /// Requests dispatched, every flow.
    pub fn dispatched(&self) -> u64 {
        self.flows.iter().map(|f| f.dispatched).sum()
    }

    /// Requests rejected by flow control (429), every flow.
    pub fn rejected(&self) -> u64 {
        self.flows.iter().map(|f| f.rejected).sum()
    }

    /// One line: `schema/level dispatched (N rejected)`, the busiest flows first.
    pub fn flows_line(&self) -> String {
        self.flows
            .iter()
            .map(|f| {
                let rejected = if f.rejected > 0 {
                    format!(" ({} rejected)", f.rejected)
                } else {
                    String::new()
                };
                format!(
                    "{}/{} {}{rejected}",
                    f.flow_schema, f.priority_level, f.dispatched
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = r#"# HELP apiserver_flowcontrol_dispatched_requests_total [BETA] Number of requests executed by API Priority and Fairness subsystem
# TYPE apiserver_flowcontrol_dispatched_requests_total counter
apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"} 40
apiserver_flowcontrol_dispatched_requests_total{flow_schema="service-accounts",priority_level="workload-low"} 10
# HELP apiserver_flowcontrol_rejected_requests_total [BETA] Number of requests rejected by API Priority and Fairness subsystem
# TYPE apiserver_flowcontrol_rejected_requests_total counter
apiserver_flowcontrol_rejected_requests_total{flow_schema="service-accounts",priority_level="workload-low",reason="queue-full"} 1
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",verb="GET"} 999
"#;

    const AFTER: &str = r#"# TYPE apiserver_flowcontrol_dispatched_requests_total counter
apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"} 45
apiserver_flowcontrol_dispatched_requests_total{flow_schema="service-accounts",priority_level="workload-low"} 710
apiserver_flowcontrol_dispatched_requests_total{flow_schema="system-nodes",priority_level="system"} 3
# TYPE apiserver_flowcontrol_rejected_requests_total counter
apiserver_flowcontrol_rejected_requests_total{flow_schema="service-accounts",priority_level="workload-low",reason="queue-full"} 4
apiserver_flowcontrol_rejected_requests_total{flow_schema="service-accounts",priority_level="workload-low",reason="time-out"} 2
"#;

    fn flow(schema: &str, level: &str) -> Flow {
        (schema.into(), level.into())
    }

    fn snapshot(text: &str, cpu_ms: u64) -> ServerSnapshot {
        ServerSnapshot {
            apiserver_cpu: Duration::from_millis(cpu_ms),
            etcd_cpu: Duration::from_millis(cpu_ms / 2),
            flows: FlowCounts::parse(text).expect("parses"),
        }
    }

    #[test]
    fn the_flow_control_counters_are_read_by_flow_and_other_metrics_ignored() {
        let counts = FlowCounts::parse(AFTER).expect("parses");
        assert_eq!(counts.dispatched.len(), 3);
        assert_eq!(
            counts.dispatched[&flow("service-accounts", "workload-low")],
            710.0
        );
        // Two reasons of one flow add up.
        assert_eq!(
            counts.rejected[&flow("service-accounts", "workload-low")],
            6.0
        );
        let before = FlowCounts::parse(BEFORE).expect("parses");
        assert!(!before.dispatched.keys().any(|(s, _)| s.is_empty()));
    }

    #[test]
    fn a_run_costs_the_difference_of_its_snapshots_busiest_flow_first() {
        let cost = ServerCost::between(&snapshot(BEFORE, 1_000), &snapshot(AFTER, 3_500));
        assert_eq!(cost.apiserver_cpu_s, 2.5);
        assert_eq!(cost.etcd_cpu_s, 1.25);
        let rows: Vec<(&str, u64, u64)> = cost
            .flows
            .iter()
            .map(|f| (f.flow_schema.as_str(), f.dispatched, f.rejected))
            .collect();
        assert_eq!(
            rows,
            [
                ("service-accounts", 700, 5),
                ("exempt", 5, 0),
                ("system-nodes", 3, 0)
            ]
        );
        assert_eq!((cost.dispatched(), cost.rejected()), (708, 5));
        assert_eq!(
            cost.flows_line(),
            "service-accounts/workload-low 700 (5 rejected), exempt/exempt 5, system-nodes/system 3"
        );
    }

    #[test]
    fn a_counter_that_went_back_counts_nothing() {
        // A restarted API server starts its counters again: never a negative or huge count.
        let cost = ServerCost::between(&snapshot(AFTER, 2_000), &snapshot(BEFORE, 1_000));
        assert_eq!(cost.apiserver_cpu_s, 0.0);
        assert!(cost.flows.is_empty());
    }
}

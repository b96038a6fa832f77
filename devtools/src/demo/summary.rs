//! The demo's closing tables: how each maintenance went, what it cost the API server, and that
//! every node came back.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::nodes::NodeMarks;
use super::requests::RequestTotals;
use super::table::Table;
use super::tracker::Tracked;

/// One maintenance in the summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeRow {
    /// The NodeMaintenance.
    pub maintenance: String,
    /// Its node.
    pub node: String,
    /// Final phase (`Running` when it did not finish in time).
    pub phase: String,
    /// Pods the drain removed (`evictionPods`).
    pub pods_evicted: u64,
    /// From the create request to Succeeded.
    pub time_to_drained: Option<Duration>,
    /// `lastError`, when there is one.
    pub last_error: Option<String>,
}

impl NodeRow {
    /// The row of a tracked maintenance.
    pub fn from_tracked(maintenance: &str, tracked: &Tracked) -> NodeRow {
        NodeRow {
            maintenance: maintenance.to_string(),
            node: tracked.node.clone(),
            phase: tracked
                .phase()
                .map(|p| format!("{p:?}"))
                .unwrap_or_else(|| "Pending".into()),
            pods_evicted: tracked.pods_to_evict(),
            time_to_drained: tracked.time_to_drained(),
            last_error: tracked.status.last_error.clone().filter(|e| !e.is_empty()),
        }
    }

    /// Whether the maintenance succeeded.
    pub fn succeeded(&self) -> bool {
        self.phase == "Succeeded"
    }
}

/// The rows of `names`, in the order given.
pub fn rows(state: &BTreeMap<String, Tracked>, names: &[String]) -> Vec<NodeRow> {
    names
        .iter()
        .map(|name| match state.get(name) {
            Some(tracked) => NodeRow::from_tracked(name, tracked),
            None => NodeRow::from_tracked(name, &Tracked::default()),
        })
        .collect()
}

/// Seconds with one decimal (`-` when unknown).
pub fn seconds(d: Option<Duration>) -> String {
    d.map(|d| format!("{:.2} s", d.as_secs_f64()))
        .unwrap_or_else(|| "-".into())
}

/// The per-node table. The simulator counts requests by verb and resource, not by object, so
/// the request column is the per-node average of nmo's total.
pub fn drain_table(rows: &[NodeRow], requests: &RequestTotals) -> String {
    let per_node = requests.total as f64 / rows.len().max(1) as f64;
    let mut table = Table::new(&[
        "maintenance",
        "node",
        "phase",
        "pods evicted",
        "time to drained",
        "API requests (avg)",
    ]);
    for row in rows {
        table.row(vec![
            row.maintenance.clone(),
            row.node.clone(),
            row.phase.clone(),
            row.pods_evicted.to_string(),
            seconds(row.time_to_drained),
            format!("{per_node:.1}"),
        ]);
    }
    table.render()
}

/// The lines under the drain table: nmo's requests by verb and what they amount to per pod.
pub fn requests_lines(rows: &[NodeRow], requests: &RequestTotals) -> String {
    let pods: u64 = rows.iter().map(|r| r.pods_evicted).sum();
    format!(
        "nmo's API requests: {} in total ({}), {:.2} per evicted pod; {} evictions, {} refused \
         with 429.\n(The simulator counts requests by verb and resource, not by object: the \
         per-node column is the total divided by the nodes.)\n",
        requests.total,
        requests.by_verb_line(),
        requests.total as f64 / pods.max(1) as f64,
        requests.evictions,
        requests.too_many_requests,
    )
}

/// The after-maintenance table of the nodes.
pub fn restored_table(marks: &[NodeMarks]) -> String {
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
    let mut table = Table::new(&[
        "node", "cordoned", "tainted", "labelled", "leased", "restored",
    ]);
    for m in marks {
        table.row(vec![
            m.node.clone(),
            yes_no(m.cordoned),
            yes_no(m.tainted),
            yes_no(m.labelled),
            yes_no(m.leased),
            yes_no(m.restored()),
        ]);
    }
    table.render()
}

//! Every `DrainBlocked` reason has its row in docs/operations.md ("My drain is stuck") and every
//! metric `/metrics` serves its row in docs/observability.md ("Metrics"), read from the code:
//! the reasons from the blocker enum's list (the one the `nmo_drains_blocked` metric labels
//! with), the metrics from the registry `nmo run` serves. A row naming what the code no longer
//! has fails too.

use std::collections::BTreeSet;

use nmo::api_client::ConnectionCount;
use nmo::observability::registry::Metrics;
use nmo_actors::diagnosis::Blocker;
use prometheus_client::encoding::text::encode;

use super::markdown::{self, code_spans, table_after_heading};

const OPERATIONS: &str = "docs/operations.md";
const STUCK_HEADING: &str = "My drain is stuck";
const OBSERVABILITY: &str = "docs/observability.md";
const METRICS_HEADING: &str = "Metrics";

/// Every reason the `DrainBlocked` condition can carry. A reason set from somewhere else than
/// the blocker enum belongs here too.
fn drain_blocked_reasons() -> BTreeSet<String> {
    Blocker::REASONS.iter().map(|r| r.to_string()).collect()
}

/// A metric family the registry holds: its registered name and, when its type is known, the
/// name a query uses (a counter's with `_total`, an info metric's with `_info`, OpenMetrics).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Served {
    registered: String,
    queried: Option<String>,
}

impl Served {
    /// The names a doc may call it by.
    fn names(&self) -> Vec<String> {
        match &self.queried {
            Some(queried) => vec![queried.clone()],
            None => ["", "_total", "_info"]
                .iter()
                .map(|suffix| format!("{}{suffix}", self.registered))
                .collect(),
        }
    }
}

/// Every metric family of the registry `nmo run` serves. The text encoding gives name and type
/// of what has samples (collectors, metrics without labels); a labelled family without a sample
/// yet is left out of it, so the registry's own descriptors (its `Debug` form, the only view
/// prometheus-client gives of them) add those, by their registered name.
fn served_metrics() -> BTreeSet<Served> {
    let metrics = Metrics::new(Some(ConnectionCount::default()));
    let mut text = String::new();
    encode(&mut text, &metrics.registry).expect("the registry encodes");
    let mut served: BTreeSet<Served> = text
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_once(' '))
        .map(|(name, kind)| Served {
            registered: name.to_string(),
            queried: Some(match kind {
                "counter" => format!("{name}_total"),
                "info" => format!("{name}_info"),
                _ => name.to_string(),
            }),
        })
        .collect();
    let debug = format!("{:?}", metrics.registry);
    let descriptors: Vec<&str> = debug
        .split("Descriptor { name: \"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .collect();
    assert!(
        descriptors.contains(&"nmo_evictions"),
        "the registry's descriptors were not read (has prometheus-client's Debug form changed?): {descriptors:?}"
    );
    for name in descriptors {
        if !served.iter().any(|s| s.registered == name) {
            served.insert(Served {
                registered: name.to_string(),
                queried: None,
            });
        }
    }
    served
}

/// The code spans of the first cells of the table under `heading` in `file`.
fn first_cells(file: &str, heading: &str) -> Result<BTreeSet<String>, String> {
    let text = markdown::read(file);
    let rows = table_after_heading(&text, heading)
        .ok_or_else(|| format!("{file} has no heading \"{heading}\" followed by a table"))?;
    Ok(rows
        .iter()
        .filter_map(|row| row.first())
        .flat_map(|cell| code_spans(cell))
        .map(str::to_string)
        .collect())
}

/// What the doc lacks and what it names that the code does not have, as a failure message.
fn compare(
    file: &str,
    heading: &str,
    what: &str,
    in_code: &BTreeSet<String>,
    in_doc: &BTreeSet<String>,
    row: &dyn Fn(&str) -> String,
) -> Result<(), String> {
    let missing: Vec<&String> = in_code.difference(in_doc).collect();
    let stale: Vec<&String> = in_doc.difference(in_code).collect();
    if missing.is_empty() && stale.is_empty() {
        return Ok(());
    }
    let mut message = String::new();
    if !missing.is_empty() {
        message.push_str(&format!(
            "{file} lacks a row for these {what} (add them to the table under \"{heading}\"):\n"
        ));
        for name in &missing {
            message.push_str(&format!("    {}\n", row(name)));
        }
    }
    if !stale.is_empty() {
        message.push_str(&format!(
            "{file}'s table under \"{heading}\" names {what} the code does not have (remove or rename them): {}\n",
            stale.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    Err(message)
}

#[test]
fn operations_md_has_a_row_for_every_drain_blocked_reason() {
    let outcome = first_cells(OPERATIONS, STUCK_HEADING).and_then(|in_doc| {
        compare(
            OPERATIONS,
            STUCK_HEADING,
            "DrainBlocked reasons (nmo_actors::diagnosis::Blocker::REASONS)",
            &drain_blocked_reasons(),
            &in_doc,
            &|reason| format!("| `{reason}` | what it means | what to do |"),
        )
    });
    if let Err(message) = outcome {
        panic!("{message}");
    }
}

#[test]
fn observability_md_has_a_row_for_every_metric_served() {
    let served = served_metrics();
    let outcome = first_cells(OBSERVABILITY, METRICS_HEADING).and_then(|in_doc| {
        // A family the doc names by one of its names counts as that name.
        let in_code: BTreeSet<String> = served
            .iter()
            .map(|metric| {
                let names = metric.names();
                names
                    .iter()
                    .find(|name| in_doc.contains(*name))
                    .unwrap_or(&names[0])
                    .clone()
            })
            .collect();
        compare(
            OBSERVABILITY,
            METRICS_HEADING,
            "metrics (nmo::observability::registry::Metrics; a counter is queried with `_total`)",
            &in_code,
            &in_doc,
            &|metric| format!("| `{metric}` | labels | what it counts |"),
        )
    });
    if let Err(message) = outcome {
        panic!("{message}");
    }
}

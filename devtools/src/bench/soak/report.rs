//! The soak's figures and checks, as printed.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use super::audit::Findings;
use super::config::SoakConfig;
use super::end_state::EndState;
use super::late_writes::LateWriteFindings;
use super::replicas::ReplicaFigures;
use super::restarts::{Recoveries, p50_and_max};
use super::takeovers::Takeovers;
use super::violations::Violations;

/// One check: what, the target, what was found, and whether it holds.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What is checked.
    pub what: String,
    /// The target.
    pub target: String,
    /// What was found.
    pub actual: String,
    /// Whether it holds.
    pub passed: bool,
    /// The first few offences, if any.
    pub examples: Vec<String>,
}

/// What became of the writes a killed leader sent in its last moment, delivered after its
/// successor took over.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct HeldWrites {
    /// Refused by the API server (their condition no longer held).
    pub refused: u64,
    /// Landed without undoing anyone's write (nothing written since, or an event, an
    /// eviction, a create).
    pub landed_harmlessly: u64,
    /// Landed over a write of the successor's.
    pub landed_over_another: u64,
}

/// Requests of one replica: (name, requests, answered with an injected-style error).
type ReplicaRequests = (String, u64, u64);

/// Everything the soak found.
#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    /// The soak's size and faults.
    pub config: SoakConfig,
    /// From the first replica's start to the end state, seconds.
    pub wall_s: f64,
    /// The checks.
    pub checks: Vec<Check>,
    /// Kills, self-exits (lost leadership) and peak memory of the replicas.
    pub replicas: ReplicaFigures,
    /// The highest peak resident set of any replica process, MiB.
    pub peak_rss_mib: f64,
    /// Leadership changes seen.
    pub leader_changes: u32,
    /// Requests per replica, and how many got a 500, 409 or 429.
    pub requests: Vec<ReplicaRequests>,
    /// How long each wave took, seconds.
    pub wave_s: Vec<f64>,
    /// After each API server restart, how long until maintenances were reconciled.
    pub recoveries: Recoveries,
    /// How the maintenances whose lease was taken over gave up.
    pub takeovers: Takeovers,
    /// Writes per replica user.
    pub writes: Vec<(String, u64)>,
    /// What became of the writes held across a handover.
    pub held_writes: HeldWrites,
    /// The replicas' logs.
    pub logs: Vec<String>,
}

fn zero(what: &str, found: &Violations) -> Check {
    Check {
        what: what.into(),
        target: "0".into(),
        actual: found.count.to_string(),
        passed: found.count == 0,
        examples: found.examples.clone(),
    }
}

impl SoakReport {
    /// Judges what was found.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        config: &SoakConfig,
        wall: Duration,
        end: &EndState,
        findings: &Findings,
        late: &LateWriteFindings,
        replicas: ReplicaFigures,
        leader_changes: u32,
        requests: Vec<ReplicaRequests>,
        wave_s: Vec<f64>,
        (recoveries, takeovers): (Recoveries, Takeovers),
        logs: Vec<String>,
    ) -> SoakReport {
        // Over 80 lines: each verdict of the soak is one short paragraph over the same inputs; they
        // stay together so the report's verdicts read in the order it prints them.
        let (converged, of) = end.converged_count();
        let orphans = end.orphans();
        let different = end.different_from_before();
        let kills_target = u32::try_from(config.kills).unwrap_or(u32::MAX);
        let checks = vec![
            Check {
                what: "maintenances converged (Succeeded, or gone with the node given back)".into(),
                target: of.to_string(),
                actual: converged.to_string(),
                passed: converged == of,
                examples: end.unconverged().into_iter().take(5).collect(),
            },
            Check {
                what: "nodes left marked or leased without a NodeMaintenance".into(),
                target: "0".into(),
                actual: orphans.len().to_string(),
                passed: orphans.is_empty(),
                examples: orphans.into_iter().take(5).collect(),
            },
            zero(
                "DaemonSet or mirror pods evicted or deleted",
                &findings.daemonset_or_mirror_pods_removed,
            ),
            zero(
                "pods deleted while their budget allowed no disruption",
                &findings.protected_pods_deleted,
            ),
            Check {
                what: "nodes given back different from their state before maintenance".into(),
                target: "0".into(),
                actual: different.len().to_string(),
                passed: different.is_empty(),
                examples: different.into_iter().take(5).collect(),
            },
            zero(
                "writes by a replica not holding the leader lease",
                &findings.writes_without_leadership,
            ),
            zero(
                "writes held across a handover that landed over the successor's (status, node, \
                 lease)",
                &late.landed_over_another,
            ),
            zero(
                "node leases another operator held (clock ahead) taken, or their nodes touched",
                &findings.foreign_leases_taken,
            ),
            Check {
                what: format!(
                    "maintenances created at an API server's return reconciled within {:?}",
                    config.recovery_timeout
                ),
                target: (config.outages.len() * config.per_restart).to_string(),
                actual: recoveries.each_s.len().to_string(),
                passed: recoveries.missed.is_empty()
                    && recoveries.each_s.len() == config.outages.len() * config.per_restart,
                examples: recoveries.missed.iter().take(5).cloned().collect(),
            },
            Check {
                what: "maintenances whose lease was taken over Failed (errorOnLeaseCount > 3), \
                       the holder's lease never written"
                    .into(),
                target: config.takeovers.to_string(),
                actual: takeovers.failed_s.len().to_string(),
                passed: takeovers.wrong.is_empty() && takeovers.failed_s.len() == config.takeovers,
                examples: takeovers.wrong.iter().take(5).cloned().collect(),
            },
            Check {
                what: "leaders killed (SIGKILL)".into(),
                target: kills_target.to_string(),
                actual: replicas.kills.to_string(),
                passed: replicas.kills == kills_target,
                examples: Vec::new(),
            },
        ];
        #[allow(
            clippy::cast_precision_loss,
            reason = "a process's memory in MiB, for reading"
        )]
        let peak_rss_mib = replicas.peak_rss_bytes as f64 / (1024.0 * 1024.0);
        SoakReport {
            config: config.clone(),
            wall_s: wall.as_secs_f64(),
            checks,
            replicas,
            peak_rss_mib,
            leader_changes,
            requests,
            wave_s,
            recoveries,
            takeovers,
            writes: findings
                .writes_by_replica
                .iter()
                .map(|(user, n)| (user.clone(), *n))
                .collect(),
            held_writes: HeldWrites {
                refused: late.refused,
                landed_harmlessly: late.landed_harmlessly,
                landed_over_another: late.landed_over_another.count,
            },
            logs,
        }
    }

    /// Whether every check holds.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }
}

impl fmt::Display for SoakReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Over 80 lines: the report's lines in the order printed, one write per line.
        let c = &self.config;
        writeln!(
            f,
            "{}: {} NodeMaintenances in {} waves on {} nodes x {} pods; {:.0}% of requests \
             answered 500/409/429, {:.0}% answered {:?} late (call deadline {:?}), watches \
             dropped every {:?}; leader killed {} times",
            c.name,
            c.waves * c.per_wave,
            c.waves,
            c.nodes,
            c.pods_per_node,
            c.error_rate * 100.0,
            c.late_rate * 100.0,
            c.late_by,
            c.call_timeout,
            c.watch_drop_after,
            c.kills,
        )?;
        writeln!(f)?;
        writeln!(f, "| check | target | actual | |")?;
        writeln!(f, "| --- | --- | --- | --- |")?;
        for check in &self.checks {
            let mark = if check.passed { "ok" } else { "FAILED" };
            writeln!(
                f,
                "| {} | {} | {} | {mark} |",
                check.what, check.target, check.actual
            )?;
            for example in &check.examples {
                writeln!(f, "|   e.g. {example} | | | |")?;
            }
        }
        writeln!(f)?;
        let waves: Vec<String> = self.wave_s.iter().map(|s| format!("{s:.1} s")).collect();
        writeln!(
            f,
            "wall: {:.1} s (waves: {})",
            self.wall_s,
            waves.join(", ")
        )?;
        writeln!(f, "peak RSS of a replica: {:.1} MiB", self.peak_rss_mib)?;
        let seconds = |values: &[f64]| match p50_and_max(values) {
            Some((p50, max)) => format!("p50 {p50:.2} s, max {max:.2} s"),
            None => "none".to_string(),
        };
        let rounds: Vec<String> = self
            .recoveries
            .down_s
            .iter()
            .zip(&self.recoveries.first_s)
            .map(|(down, first)| format!("down {down:.0} s: {first:.2} s"))
            .collect();
        writeln!(
            f,
            "API server restarts: {} (connections dropped: {:?}); from its return to the first \
             reconciled maintenance: {} ({}); to each: {}",
            self.recoveries.down_s.len(),
            self.recoveries.dropped,
            rounds.join(", "),
            seconds(&self.recoveries.first_s),
            seconds(&self.recoveries.each_s),
        )?;
        writeln!(
            f,
            "lease takeovers: {}; from the takeover to Failed: {}",
            self.takeovers.failed_s.len(),
            seconds(&self.takeovers.failed_s),
        )?;
        writeln!(
            f,
            "leadership changes: {}; replicas killed: {}; replicas that exited after losing \
             leadership (and were restarted): {}",
            self.leader_changes, self.replicas.kills, self.replicas.exits
        )?;
        for (name, requests, errors) in &self.requests {
            writeln!(
                f,
                "replica {name}: {requests} requests, {errors} answered 500/409/429"
            )?;
        }
        for (user, writes) in &self.writes {
            writeln!(f, "writes by {user}: {writes}")?;
        }
        let held = &self.held_writes;
        writeln!(
            f,
            "writes held across a handover: {} refused, {} landed harmlessly, {} landed over \
             the successor's",
            held.refused, held.landed_harmlessly, held.landed_over_another
        )?;
        writeln!(f, "logs: {}", self.logs.join(", "))?;
        write!(
            f,
            "result: {}",
            if self.passed() {
                "every check passed"
            } else {
                "FAILED"
            }
        )
    }
}

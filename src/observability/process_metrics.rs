//! What the process says about itself: which build it is (`nmo_build_info`), whether it leads
//! (`nmo_leader`), and the standard process metrics (`process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_open_fds`, ...) read from /proc at each scrape.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use crate::build_info;
use crate::leader::LEADER_ELECTION_ID;

/// Labels of `nmo_build_info`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    commit: &'static str,
}

/// Registers `nmo_build_info{version,commit} 1` (an OpenMetrics info metric).
pub fn register_build_info(registry: &mut Registry) {
    registry.register(
        "nmo_build",
        "The version and git commit nmo was built from",
        Info::new(BuildLabels {
            version: build_info::VERSION,
            commit: build_info::COMMIT,
        }),
    );
}

/// Label of `leader_election_master_status`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ElectionLabels {
    name: &'static str,
}

/// `nmo_leader`: 1 while this replica leads (or runs without leader election), 0 while it
/// stands by; and client-go's `leader_election_master_status{name}`, the same for the election's
/// lease, present only with leader election (as in controller-runtime). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Leadership {
    leader: Gauge,
    master_status: Family<ElectionLabels, Gauge>,
    elected: Arc<AtomicBool>,
}

impl Leadership {
    /// Registers the gauges in `registry` (at 0: standing by).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "nmo_leader",
            "1 on the replica that leads (acts on NodeMaintenances), 0 on a standby",
            self.leader.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
            self.master_status.clone(),
        );
    }

    fn master_status(&self) -> Option<Gauge> {
        self.elected.load(Ordering::Acquire).then(|| {
            self.master_status
                .get_or_create(&ElectionLabels {
                    name: LEADER_ELECTION_ID,
                })
                .clone()
        })
    }

    /// This replica takes part in the leader election (it stands by until it leads).
    pub fn electing(&self) {
        self.elected.store(true, Ordering::Release);
        if let Some(status) = self.master_status() {
            status.set(0);
        }
    }

    /// This replica leads.
    pub fn leading(&self) {
        self.leader.set(1);
        if let Some(status) = self.master_status() {
            status.set(1);
        }
    }

    /// This replica does not lead (any more).
    pub fn standing_by(&self) {
        self.leader.set(0);
        if let Some(status) = self.master_status() {
            status.set(0);
        }
    }
}

/// The standard process metrics, read from /proc at each scrape (Linux only; elsewhere none).
#[derive(Debug, Default)]
pub struct ProcessCollector;

impl prometheus_client::collector::Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(sample) = sample() else {
            return Ok(());
        };
        let cpu = ConstCounter::new(sample.cpu_seconds);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            cpu.metric_type(),
        )?)?;
        for (name, help, value) in [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                sample.resident_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                sample.virtual_bytes,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                sample.start_time_seconds,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                sample.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                sample.max_fds,
            ),
        ] {
            let Some(value) = value else { continue };
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

/// One reading of the process's resources.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    cpu_seconds: f64,
    resident_bytes: Option<f64>,
    virtual_bytes: Option<f64>,
    start_time_seconds: Option<f64>,
    open_fds: Option<f64>,
    max_fds: Option<f64>,
}

/// Counts as a gauge's f64 (exact below 2^53, far above any count here).
#[allow(clippy::cast_precision_loss)]
fn float(n: u64) -> f64 {
    n as f64
}

#[cfg(target_os = "linux")]
fn sample() -> Option<Sample> {
    use procfs::WithCurrentSystemInfo;
    use procfs::process::{LimitValue, Process};

    let process = Process::myself().ok()?;
    let stat = process.stat().ok()?;
    let ticks = float(procfs::ticks_per_second().max(1));
    let start_time_seconds = procfs::boot_time_secs()
        .ok()
        .map(|boot| float(boot) + float(stat.starttime) / ticks);
    let max_fds = process
        .limits()
        .ok()
        .and_then(|limits| match limits.max_open_files.soft_limit {
            LimitValue::Value(n) => Some(float(n)),
            LimitValue::Unlimited => None,
        });
    Some(Sample {
        cpu_seconds: float(stat.utime.saturating_add(stat.stime)) / ticks,
        resident_bytes: Some(float(stat.rss_bytes().get())),
        virtual_bytes: Some(float(stat.vsize)),
        start_time_seconds,
        open_fds: process.fd_count().ok().map(|n| float(n as u64)),
        max_fds,
    })
}

#[cfg(not(target_os = "linux"))]
fn sample() -> Option<Sample> {
    None
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    fn scrape(registry: &Registry) -> String {
        let mut text = String::new();
        encode(&mut text, registry).unwrap();
        text
    }

    #[test]
    fn build_info_names_version_and_commit() {
        let mut registry = Registry::default();
        register_build_info(&mut registry);
        let text = scrape(&registry);
        let expected = format!(
            "nmo_build_info{{version=\"{}\",commit=\"{}\"}} 1",
            build_info::VERSION,
            build_info::COMMIT
        );
        assert!(text.contains(&expected), "{text}");
    }

    #[test]
    fn the_leader_gauge_follows_leadership() {
        let mut registry = Registry::default();
        let leadership = Leadership::default();
        leadership.register(&mut registry);
        assert!(scrape(&registry).contains("nmo_leader 0"));
        leadership.leading();
        assert!(scrape(&registry).contains("nmo_leader 1"));
        leadership.standing_by();
        assert!(scrape(&registry).contains("nmo_leader 0"));
        assert!(
            !scrape(&registry).contains("leader_election_master_status{"),
            "no election, no election status"
        );
    }

    #[test]
    fn the_election_status_names_the_lease_as_client_go_does() {
        let mut registry = Registry::default();
        let leadership = Leadership::default();
        leadership.register(&mut registry);
        leadership.electing();
        let series = "leader_election_master_status{name=\"135b1886.medik8s.io\"}";
        assert!(scrape(&registry).contains(&format!("{series} 0")));
        leadership.leading();
        assert!(scrape(&registry).contains(&format!("{series} 1")));
        leadership.standing_by();
        assert!(scrape(&registry).contains(&format!("{series} 0")));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn process_metrics_are_read_from_proc() {
        // Some CPU time to see: a young test process may not have used a clock tick yet.
        let busy = std::time::Instant::now();
        let mut spin = 0_u64;
        while busy.elapsed() < std::time::Duration::from_millis(100) {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
        let mut registry = Registry::default();
        registry.register_collector(Box::new(ProcessCollector));
        let text = scrape(&registry);
        let value = |name: &str| -> f64 {
            text.lines()
                .find_map(|line| line.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("no {name} in {text}"))
                .parse()
                .unwrap()
        };
        assert!(value("process_cpu_seconds_total") > 0.0);
        // A test binary holds at least a few megabytes and three descriptors.
        assert!(value("process_resident_memory_bytes") > 1e6);
        assert!(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
        assert!(value("process_open_fds") >= 3.0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = value("process_start_time_seconds");
        assert!(
            started <= now + 1.0 && started > now - 86_400.0,
            "{started} vs {now}"
        );
    }
}

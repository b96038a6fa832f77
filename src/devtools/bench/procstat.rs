//! A process's resource use, read from /proc: what the benchmarks report for the operator
//! process alone (the simulator runs in another process so its cost is not mixed in).

use std::time::Duration;

/// Why a process's figures could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    /// /proc/<pid>/... could not be read (the process is gone, or this is not Linux).
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file did not have the expected shape.
    #[error("unexpected contents in {0}")]
    Parse(String),
}

/// Resource use of one process so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessUsage {
    /// Peak resident set size (VmHWM), bytes.
    pub peak_rss_bytes: u64,
    /// Current resident set size (VmRSS), bytes.
    pub rss_bytes: u64,
    /// User plus system CPU time.
    pub cpu: Duration,
}

fn read(path: String) -> Result<String, ProcError> {
    std::fs::read_to_string(&path).map_err(|source| ProcError::Read { path, source })
}

/// The `VmHWM`/`VmRSS`-style line of /proc/<pid>/status, in bytes.
fn status_kib(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with(key))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Clock ticks per second for /proc/<pid>/stat times. Linux reports them in USER_HZ, which is
/// 100 on every architecture the kernel supports today.
const USER_HZ: u64 = 100;

/// utime + stime from /proc/<pid>/stat (fields 14 and 15, counted after the command name,
/// which may itself contain spaces and parentheses).
fn stat_cpu(stat: &str) -> Option<Duration> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // after_name starts at field 3 (state), so utime (14) is index 11 and stime (15) index 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 1000 / USER_HZ))
}

/// The figures of process `pid` now.
pub fn usage(pid: u32) -> Result<ProcessUsage, ProcError> {
    let status_path = format!("/proc/{pid}/status");
    let status = read(status_path.clone())?;
    let stat_path = format!("/proc/{pid}/stat");
    let stat = read(stat_path.clone())?;
    Ok(ProcessUsage {
        peak_rss_bytes: status_kib(&status, "VmHWM:")
            .ok_or_else(|| ProcError::Parse(status_path.clone()))?,
        rss_bytes: status_kib(&status, "VmRSS:").ok_or(ProcError::Parse(status_path))?,
        cpu: stat_cpu(&stat).ok_or(ProcError::Parse(stat_path))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_with_an_awkward_command_name_parses() {
        let stat =
            "4242 (nmo (run) x) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 9 0 1 2 3";
        assert_eq!(stat_cpu(stat), Some(Duration::from_secs(3)));
    }

    #[test]
    fn this_process_has_a_plausible_footprint() {
        let own = usage(std::process::id()).expect("/proc is readable on Linux");
        assert!(own.peak_rss_bytes >= own.rss_bytes);
        assert!(
            own.rss_bytes > 1024 * 1024,
            "a test process uses more than 1 MiB"
        );
    }
}

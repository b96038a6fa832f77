//! A process's resource use, read from /proc and its CPU-time clock: what the benchmarks report for the operator
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

/// CPU time of process `pid` from its CPU-time clock (`clock_getcpuclockid`): every thread,
/// exited ones included, to the nanosecond. /proc/<pid>/stat counts the same time in 10 ms
/// ticks, which is 5-8 % of a 0.13 s run: the benchmarks' smallest runs are that short.
fn clock_cpu(pid: u32) -> Option<Duration> {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).ok()?);
    let now = nix::time::clock_getcpuclockid(pid).ok()?.now().ok()?;
    Some(Duration::from(now))
}

/// The figures of process `pid` now.
pub fn usage(pid: u32) -> Result<ProcessUsage, ProcError> {
    let status_path = format!("/proc/{pid}/status");
    let status = read(status_path.clone())?;
    let cpu = match clock_cpu(pid) {
        Some(cpu) => cpu,
        // Not permitted (another user's process): the ticks of /proc.
        None => {
            let stat_path = format!("/proc/{pid}/stat");
            stat_cpu(&read(stat_path.clone())?).ok_or(ProcError::Parse(stat_path))?
        }
    };
    Ok(ProcessUsage {
        peak_rss_bytes: status_kib(&status, "VmHWM:")
            .ok_or_else(|| ProcError::Parse(status_path.clone()))?,
        rss_bytes: status_kib(&status, "VmRSS:").ok_or(ProcError::Parse(status_path))?,
        cpu,
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
    fn the_cpu_clock_is_finer_than_ticks_and_agrees_with_them() {
        let pid = std::process::id();
        let start = clock_cpu(pid).expect("a process may read its own CPU clock");
        // Burn about 30 ms of CPU.
        let mut x = 0u64;
        while clock_cpu(pid).is_some_and(|now| now < start + Duration::from_millis(30)) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let clock = clock_cpu(pid).expect("still readable");
        let ticks =
            stat_cpu(&read(format!("/proc/{pid}/stat")).expect("own stat")).expect("parses");
        assert!(clock >= start + Duration::from_millis(30));
        assert_ne!(
            clock.as_nanos() % 10_000_000,
            0,
            "not whole ticks: {clock:?}"
        );
        // Both count the same time; ticks are truncated and sampled, so allow a few.
        let gap = clock.abs_diff(ticks);
        assert!(
            gap < Duration::from_millis(100),
            "clock {clock:?}, ticks {ticks:?}"
        );
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

//! What Linux's /proc says about a process: whether it lives, and how much memory it holds.

use std::path::Path;

/// A process's identity over time: its pid and its start time (clock ticks since boot), so that
/// a pid reused by a later process is not mistaken for the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessId {
    /// The pid.
    pub pid: u32,
    /// The start time from /proc/PID/stat.
    pub start_time: u64,
}

/// The fields of /proc/PID/stat after the command name, which may contain spaces.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &text[text.rfind(')')? + 1..];
    Some(after_name.split_whitespace().map(str::to_string).collect())
}

/// The process `pid` as it is now, if it exists and is not a zombie.
pub fn live(pid: u32) -> Option<ProcessId> {
    let fields = stat_fields(pid)?;
    // Field 3 is the state; field 22 the start time (0 and 19 after the name).
    if fields.first().map(String::as_str) == Some("Z") {
        return None;
    }
    let start_time = fields.get(19)?.parse().ok()?;
    Some(ProcessId { pid, start_time })
}

/// Whether `pid` is a live process (not gone, not a zombie).
pub fn is_alive(pid: u32) -> bool {
    live(pid).is_some()
}

/// This process.
pub fn this_process() -> Option<ProcessId> {
    live(std::process::id())
}

/// Whether `pid` runs with `needle` in its command line (e.g. a data directory's path).
pub fn command_line_mentions(pid: u32, needle: &Path) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let needle = needle.as_os_str().as_encoded_bytes();
    !needle.is_empty() && cmdline.windows(needle.len()).any(|window| window == needle)
}

/// Resident memory of `pid` now and at its peak, in bytes (VmRSS, VmHWM).
pub fn memory(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|line| line.starts_with(name))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_an_exited_child_is_not() {
        let me = this_process().expect("this process is in /proc");
        assert_eq!(me.pid, std::process::id());
        assert!(me.start_time > 0);
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!is_alive(pid));
    }

    #[test]
    fn the_command_line_is_searched() {
        let me = std::process::id();
        let exe = std::env::current_exe().unwrap();
        assert!(command_line_mentions(
            me,
            Path::new(exe.file_name().unwrap())
        ));
        assert!(!command_line_mentions(
            me,
            Path::new("/no/such/dir/anywhere")
        ));
    }

    #[test]
    fn memory_is_read() {
        let (rss, peak) = memory(std::process::id()).unwrap();
        assert!(rss > 0 && peak >= rss, "{rss} {peak}");
    }
}

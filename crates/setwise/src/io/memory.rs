//! What the kernel says of this machine's memory: what a process may still take (for
//! the budgets of a served database, a build, and a staged run's live roles).

use std::path::Path;

/// The memory this process may still take, if the kernel says: Linux's `MemAvailable`,
/// and within a container the cgroup's limit less its use but for its inactive page
/// cache (cgroup v2), whichever is less.
pub fn available_memory() -> Option<usize> {
    let machine = meminfo("MemAvailable")?;
    let read = |f: &str| std::fs::read_to_string(Path::new("/sys/fs/cgroup").join(f)).ok();
    // The cgroup's use counts its page cache (the input just read, say); the part the
    // kernel reclaims first, `inactive_file`, is room.
    let reclaimable = read("memory.stat")
        .and_then(|st| st.lines().find_map(|l| l.strip_prefix("inactive_file ")?.trim().parse::<usize>().ok()))
        .unwrap_or(0);
    // "max" (no limit) does not parse, and leaves the machine's figure.
    let cgroup = read("memory.max")
        .and_then(|m| m.trim().parse::<usize>().ok())
        .zip(read("memory.current").and_then(|c| c.trim().parse::<usize>().ok()))
        .map(|(max, used)| max.saturating_sub(used.saturating_sub(reclaimable)));
    Some(cgroup.map_or(machine, |c| c.min(machine)))
}

/// The machine's free swap (Linux's `SwapFree`), if the kernel says.
pub fn swap_free() -> Option<usize> {
    meminfo("SwapFree")
}

/// A `/proc/meminfo` figure (`field: N kB`) in bytes.
fn meminfo(field: &str) -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?;
    let kib: usize = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

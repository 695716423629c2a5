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

/// The address space this process may still map under its `RLIMIT_AS` (Linux's "Max
/// address space" in `/proc/self/limits`, less its `VmSize`), if it has such a limit.
/// Spark's `spark.executor.pyspark.memory` sets one on each Python worker. It counts what
/// threads and allocators reserve, not only what they use.
pub fn address_space_left() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    Some(address_space_limit(&limits)?.saturating_sub(vm_size(&status)?))
}

/// The soft "Max address space" of a `/proc/PID/limits` text, in bytes; None if unlimited.
fn address_space_limit(limits: &str) -> Option<usize> {
    let line = limits.lines().find_map(|l| l.strip_prefix("Max address space"))?;
    line.split_whitespace().next()?.parse().ok()
}

/// `VmSize` of a `/proc/PID/status` text, in bytes.
fn vm_size(status: &str) -> Option<usize> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmSize:"))?;
    line.trim().strip_suffix("kB")?.trim().parse::<usize>().ok()?.checked_mul(1024)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_space_limit_and_size_are_read_from_procs_texts() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max stack size            8388608              unlimited            bytes     \n\
                      Max address space         4294967296           unlimited            bytes     \n";
        assert_eq!(address_space_limit(limits), Some(4 << 30));
        assert_eq!(address_space_limit(&limits.replace("4294967296", "unlimited ")), None);
        assert_eq!(vm_size("Name:\tpython\nVmPeak:\t  9000 kB\nVmSize:\t  2048 kB\n"), Some(2 << 20));
        // This process: no limit here, or some room under it.
        let own = std::fs::read_to_string("/proc/self/limits").unwrap();
        assert_eq!(address_space_left().is_some(), address_space_limit(&own).is_some());
    }
}

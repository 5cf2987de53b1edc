//! Parse the resource lines of a ptxas verbose log (NVRTC `--ptxas-options=-v`), so the
//! resource report exists even without a GPU. With a device, function attributes of the
//! loaded module are the authority; this parser gives the compiler's own account.

use crate::device::KernelResources;

/// Per-kernel resources found in `log`, in the order the log lists them.
pub fn parse_resources(log: &str) -> Vec<KernelResources> {
    let mut out: Vec<KernelResources> = Vec::new();
    for line in log.lines() {
        let line = line.trim();
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            if let Some(name) = rest.split('\'').next() {
                out.push(KernelResources {
                    kernel: name.to_string(),
                    registers: 0,
                    static_shared_bytes: 0,
                    local_bytes: 0,
                    max_threads_per_block: None,
                    source: "ptxas".to_string(),
                });
            }
            continue;
        }
        let Some(cur) = out.last_mut() else { continue };
        if line.contains("bytes stack frame") {
            // "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"
            let frame = number_before(line, "bytes stack frame").unwrap_or(0);
            let stores = number_before(line, "bytes spill stores").unwrap_or(0);
            cur.local_bytes = frame.max(stores);
        } else if line.contains("Used ") && line.contains("registers") {
            // "Used 30 registers, used 1 barriers, 4224 bytes smem"
            cur.registers = number_before(line, "registers").unwrap_or(0);
            cur.static_shared_bytes = number_before(line, "bytes smem").unwrap_or(0);
        }
    }
    out
}

fn number_before(line: &str, marker: &str) -> Option<u32> {
    let head = &line[..line.find(marker)?];
    head.split(|c: char| !c.is_ascii_digit())
        .rfind(|s| !s.is_empty())?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "ptxas info    : 8 bytes gmem
ptxas info    : Compiling entry function 'transpose_broken' for 'sm_90'
ptxas info    : Function properties for transpose_broken
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 28 registers, used 0 barriers, 4224 bytes smem
ptxas info    : Compile time = 8.673 ms
ptxas info    : Compiling entry function 'transpose_naive' for 'sm_90'
ptxas info    : Function properties for transpose_naive
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 20 registers, used 0 barriers
";

    #[test]
    fn parses_registers_shared_and_local_per_kernel() {
        let r = parse_resources(LOG);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].kernel, "transpose_broken");
        assert_eq!(
            (r[0].registers, r[0].static_shared_bytes, r[0].local_bytes),
            (28, 4224, 0)
        );
        assert_eq!(r[1].kernel, "transpose_naive");
        assert_eq!(
            (r[1].registers, r[1].static_shared_bytes, r[1].local_bytes),
            (20, 0, 16)
        );
        assert!(parse_resources("no ptxas here").is_empty());
    }
}

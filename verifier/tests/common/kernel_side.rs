//! The running kernel's verdict on a probe: its maps created, their fds swapped into the
//! program, loaded as XDP with a level-1 log and statistics.

use super::probe::{Probe, ProbeMap, subprog_starts};
use bpfemu_isa::RawInsn;
use bpfemu_kernel::verifier_error_line;
use bpfemu_kernel::{self as kernel, FuncInfo, LoadOptions, MapSpec};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// What a verifier said about one program, in the terms both sides share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement {
    pub accepted: bool,
    /// The final error line of the log, for a rejection.
    pub message: Option<String>,
    /// `processed N insns`, when the verifier got to say it.
    pub processed: Option<u64>,
}

impl Judgement {
    /// A one-line summary for reports.
    pub fn summary(&self) -> String {
        match (&self.accepted, &self.message) {
            (true, _) => "accepted".to_owned(),
            (false, Some(m)) => format!("rejected: {m}"),
            (false, None) => "rejected".to_owned(),
        }
    }
}

/// Creates the probe's maps in the kernel; an error names the map.
pub fn create_maps(maps: &[ProbeMap]) -> Result<Vec<OwnedFd>, String> {
    create_maps_with_btf(maps, None)
}

/// Creates the maps, those declared with BTF with their key and value types from `btf` (the
/// probe's BTF, loaded).
pub fn create_maps_with_btf(
    maps: &[ProbeMap],
    btf: Option<(&OwnedFd, &ProbeBtf)>,
) -> Result<Vec<OwnedFd>, String> {
    maps.iter()
        .enumerate()
        .map(|(i, m)| {
            let map_btf = btf.and_then(|(fd, b)| {
                b.map_types[i].map(|(key, value)| kernel::MapBtf {
                    fd: fd.as_raw_fd(),
                    key_type_id: key,
                    value_type_id: value,
                })
            });
            kernel::map_create(&MapSpec {
                btf: map_btf,
                name: kernel::object_name(&m.name),
                map_type: m.map_type,
                key_size: m.key_size,
                value_size: m.value_size,
                max_entries: m.max_entries,
                map_flags: m.map_flags,
                map_extra: m.map_extra,
                ..Default::default()
            })
            .map_err(|errno| format!("map {}: BPF_MAP_CREATE fails with errno {errno}", m.name))
            .and_then(|fd| fill_and_freeze(m, fd))
        })
        .collect()
}

/// A read-only data map gets its contents and is frozen, as libbpf does with `.rodata`.
fn fill_and_freeze(m: &ProbeMap, fd: OwnedFd) -> Result<OwnedFd, String> {
    let Some(data) = &m.frozen else {
        return Ok(fd);
    };
    kernel::map_update(&fd, &0u32.to_le_bytes(), data, 0)
        .and_then(|()| kernel::map_freeze(fd.as_fd()))
        .map_err(|errno| {
            format!(
                "map {}: filling and freezing fails with errno {errno}",
                m.name
            )
        })?;
    Ok(fd)
}

/// The program as the kernel takes it: map indices replaced by fds.
pub fn with_fds(insns: &[RawInsn], fds: &[OwnedFd]) -> Vec<RawInsn> {
    let mut out = insns.to_vec();
    let mut pc = 0;
    while pc < out.len() {
        let i = out[pc];
        if i.code == 0x18
            && (i.src == 1 || i.src == 2)
            && let Some(fd) = fds.get(i.imm as usize)
        {
            out[pc].imm = fd.as_raw_fd();
        }
        pc += if i.code == 0x18 { 2 } else { 1 };
    }
    out
}

/// Loads the probe in the kernel; an `Err` is a broken probe (a map the kernel refuses).
pub fn judge(probe: &Probe) -> Result<Judgement, String> {
    let fds = probe_maps(probe)?;
    let insns = with_fds(&probe.insns, &fds);
    Ok(judge_insns(&insns, probe.btf))
}

/// The probe's maps in the kernel, those declared with BTF (or special fields) with their
/// key and value types from the probe's BTF.
fn probe_maps(probe: &Probe) -> Result<Vec<OwnedFd>, String> {
    if !probe.maps.iter().any(|m| m.btf) {
        return create_maps(&probe.maps);
    }
    let btf = probe_btf(&subprog_starts(&probe.insns), &probe.maps);
    let fd = kernel::btf_load(&btf.blob)
        .map_err(|(errno, log)| format!("probe BTF rejected (errno {errno}): {log}"))?;
    create_maps_with_btf(&probe.maps, Some((&fd, &btf)))
}

/// Loads a program whose map references already hold fds.
pub fn judge_insns(insns: &[RawInsn], btf: bool) -> Judgement {
    // BPF_LOG_STATS alone: every message and the statistics, without the per-instruction trace
    // that makes a 1M-instruction log slow to write (the final error line is the same).
    let (log, accepted) = load_with_log(insns, btf, kernel::BPF_LOG_STATS);
    judgement_from_log(&log, accepted)
}

/// The kernel's log of `probe` at `log_level`.
pub fn log_of(probe: &Probe, log_level: u32) -> Result<String, String> {
    let fds = probe_maps(probe)?;
    let insns = with_fds(&probe.insns, &fds);
    Ok(load_with_log(&insns, probe.btf, log_level).0)
}

/// Loads a program whose map references already hold fds (with func_info BTF for its
/// subprograms when `btf`): its log and whether the kernel accepted it.
fn load_with_log(insns: &[RawInsn], btf: bool, log_level: u32) -> (String, bool) {
    let mut opts = LoadOptions::new(kernel::BPF_PROG_TYPE_XDP, insns);
    opts.log_level = log_level;
    opts.log_size = 1 << 20;
    let btf_fd;
    let func_info;
    if btf {
        let (blob, infos) = subprog_btf(&subprog_starts(insns));
        btf_fd = kernel::btf_load(&blob)
            .unwrap_or_else(|(errno, log)| panic!("probe BTF rejected (errno {errno}): {log}"));
        func_info = infos;
        opts.prog_btf_fd = Some(btf_fd.as_raw_fd());
        opts.func_info = &func_info;
    }
    loop {
        let result = kernel::prog_load(&opts);
        // The log rolls over when it does not fit and the load then fails with ENOSPC, whatever
        // the verdict: grow it and ask again.
        if result.fd.as_ref().err() == Some(&libc::ENOSPC) && opts.log_size < 1 << 30 {
            opts.log_size *= 8;
            continue;
        }
        return (result.log, result.fd.is_ok());
    }
}

/// The kernel's final error line for `insns` loaded alone as an XDP program of an object
/// under `license` (map references already fds), or `None` when it loads them.
pub fn kernel_error_line(insns: &[RawInsn], license: &std::ffi::CStr) -> Option<String> {
    let mut opts = LoadOptions::new(kernel::BPF_PROG_TYPE_XDP, insns);
    opts.log_level = kernel::BPF_LOG_STATS;
    opts.log_size = 1 << 20;
    opts.license = license;
    let result = kernel::prog_load(&opts);
    result.fd.is_err().then(|| final_error_line(&result.log))
}

/// Reads the verdict, final error line and processed count out of a level-1 log.
pub fn judgement_from_log(log: &str, accepted: bool) -> Judgement {
    let processed = log
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("processed "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok());
    Judgement {
        accepted,
        message: (!accepted).then(|| final_error_line(log)),
        processed,
    }
}

/// The log's final error line. A few kernel messages lack their newline (`expected prog array
/// map for tail call`), so the statistics that follow are glued to them: cut those off.
fn final_error_line(log: &str) -> String {
    let line = verifier_error_line(log);
    match line.find("verification time ") {
        Some(at) if at > 0 => line[..at].to_owned(),
        _ => line,
    }
}

/// A BTF blob with `int` and one static `int fN(void)` per subprogram, and the func_info that
/// ties them to `starts`: what the kernel needs before it takes a function's address.
pub fn subprog_btf(starts: &[u32]) -> (Vec<u8>, Vec<FuncInfo>) {
    let btf = probe_btf(starts, &[]);
    (btf.blob, btf.func_info)
}

/// A probe's BTF: the subprograms' functions and, for maps declared with BTF, their key and
/// value types (the value a struct holding the declared special fields).
pub struct ProbeBtf {
    pub blob: Vec<u8>,
    pub func_info: Vec<FuncInfo>,
    /// Per map: (key type id, value type id) when the map has BTF.
    pub map_types: Vec<Option<(u32, u32)>>,
}

/// Builds the probe's BTF. Without BTF maps the types are `[1] int`, `[2] int (void)` and the
/// functions; with them `[3] unsigned char`, `[4] struct bpf_spin_lock`, `[5] struct bpf_timer`
/// and the maps' types come before the functions.
pub fn probe_btf(starts: &[u32], maps: &[ProbeMap]) -> ProbeBtf {
    const INT: u32 = 1;
    const ARRAY: u32 = 3;
    const STRUCT: u32 = 4;
    const FUNC: u32 = 12;
    const FUNC_PROTO: u32 = 13;
    let mut strings = b"\0int\0".to_vec();
    let name = |strings: &mut Vec<u8>, text: &str| {
        let off = strings.len() as u32;
        strings.extend_from_slice(text.as_bytes());
        strings.push(0);
        off
    };
    // [1] int (signed, 32 bits), [2] int (void)
    let mut types: Vec<u32> = vec![1, INT << 24, 4, 0x0100_0020, 0, FUNC_PROTO << 24, 1];
    let mut next_id = 3;
    let mut map_types = vec![None; maps.len()];
    if maps.iter().any(|m| m.btf) {
        let uchar = name(&mut strings, "unsigned char");
        let lock = name(&mut strings, "bpf_spin_lock");
        let timer = name(&mut strings, "bpf_timer");
        // [3] unsigned char, [4] struct bpf_spin_lock (4 bytes), [5] struct bpf_timer (16)
        types.extend([
            uchar,
            INT << 24,
            1,
            8,
            lock,
            STRUCT << 24,
            4,
            timer,
            STRUCT << 24,
            16,
        ]);
        next_id = 6;
        for (i, m) in maps.iter().enumerate().filter(|(_, m)| m.btf) {
            let key = if m.key_size == 4 {
                1
            } else {
                types.extend([0, ARRAY << 24, 0, 3, 1, m.key_size]);
                next_id += 1;
                next_id - 1
            };
            let value_name = name(&mut strings, &format!("v{i}"));
            types.extend([
                value_name,
                (STRUCT << 24) | m.special.len() as u32,
                m.value_size,
            ]);
            for (k, (kind, off)) in m.special.iter().enumerate() {
                let member = name(&mut strings, &format!("f{k}"));
                let ty = if *kind == "bpf_timer" { 5 } else { 4 };
                types.extend([member, ty, off * 8]);
            }
            map_types[i] = Some((key, next_id));
            next_id += 1;
        }
    }
    let mut func_info = Vec::new();
    for (i, &start) in starts.iter().enumerate() {
        let name_off = name(&mut strings, &format!("f{i}"));
        types.extend([name_off, FUNC << 24, 2]);
        func_info.push(FuncInfo {
            insn_off: start,
            type_id: next_id,
        });
        next_id += 1;
    }
    let type_bytes: Vec<u8> = types.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut blob = Vec::new();
    blob.extend_from_slice(&0xeb9fu16.to_le_bytes());
    blob.extend_from_slice(&[1, 0]);
    let header = [
        24,
        0,
        type_bytes.len() as u32,
        type_bytes.len() as u32,
        strings.len() as u32,
    ];
    for word in header {
        blob.extend_from_slice(&word.to_le_bytes());
    }
    blob.extend(type_bytes);
    blob.extend(strings);
    ProbeBtf {
        blob,
        func_info,
        map_types,
    }
}

//! bpfemu's verdict on a probe, in the same terms as the kernel's.

use super::kernel_side::{Judgement, probe_btf};
use super::probe::{Probe, ProbeMap, subprog_starts};
use bpfemu_isa::KernelVersion;
use bpfemu_kernel::verifier_error_line;
use bpfemu_loader::btf::Btf;
use bpfemu_loader::{Kernel, MapOrigin, MapSpec};
use bpfemu_verifier::{Options, ProgramInput, Verdict, verify};

/// The loader's description of a probe's map.
pub fn map_spec(m: &ProbeMap) -> MapSpec {
    MapSpec {
        name: m.name.clone(),
        map_type: m.map_type,
        key_size: m.key_size,
        value_size: m.value_size,
        max_entries: m.max_entries,
        map_flags: m.map_flags,
        numa_node: 0,
        pinning: 0,
        map_extra: m.map_extra,
        key_type: None,
        value_type: None,
        inner: None,
        init_slots: Vec::new(),
        initial: m.frozen.clone(),
        origin: match m.frozen {
            Some(_) => MapOrigin::GlobalData {
                section: ".rodata".to_owned(),
            },
            None => MapOrigin::BtfDefined,
        },
    }
}

/// Verifies the probe with bpfemu for `kernel` (the running one, shared by the probes so its
/// BTF is read once), giving it what the kernel gets (the same BTF when the kernel gets BTF).
pub fn verify_probe(probe: &Probe, opts: &Options, kernel: &Kernel) -> Verdict {
    let starts = subprog_starts(&probe.insns);
    let probe_btf = probe_btf(&starts, &probe.maps);
    let maps: Vec<MapSpec> = probe
        .maps
        .iter()
        .zip(&probe_btf.map_types)
        .map(|(m, types)| MapSpec {
            key_type: types.map(|(key, _)| key),
            value_type: types.map(|(_, value)| value),
            ..map_spec(m)
        })
        .collect();
    let mut input = ProgramInput::raw(6, &probe.insns, &maps, kernel);
    let functions: Vec<(String, usize)> = starts
        .iter()
        .enumerate()
        .map(|(i, &s)| (format!("f{i}"), s as usize))
        .collect();
    let btf;
    let func_info: Vec<(usize, u32)>;
    if probe.btf {
        btf = Btf::parse(&probe_btf.blob).expect("the probe BTF parses");
        func_info = probe_btf
            .func_info
            .iter()
            .map(|f| (f.insn_off as usize, f.type_id))
            .collect();
        input.btf = Some(&btf);
        input.func_info = &func_info;
    }
    input.functions = &functions;
    verify(&input, opts)
}

/// The verdict in the comparison's terms.
pub fn judgement(verdict: &Verdict) -> Judgement {
    Judgement {
        accepted: verdict.is_accepted(),
        // The kernel's side is the last meaningful line of its log; where the kernel logs no
        // reason, bpfemu's log gives that line the same way.
        message: verdict.rejection().map(|r| {
            r.kernel_error_line()
                .map_or_else(|| verifier_error_line(&verdict.log), str::to_owned)
        }),
        processed: Some(verdict.stats.processed_insns),
    }
}

/// bpfemu's answer as `version`, in the terms the kernel's judge uses: a map the version
/// cannot create fails the load as the judge reports it; else the verifier's verdict.
pub fn judge_as(p: &Probe, version: KernelVersion) -> Judgement {
    for m in &p.maps {
        if let Some((errno, _)) =
            bpfemu_verifier::profile::maps::creation_refusal(version, m.map_type)
        {
            return Judgement {
                accepted: false,
                message: Some(format!(
                    "map {}: BPF_MAP_CREATE fails with errno {}",
                    m.name, errno.0
                )),
                processed: None,
            };
        }
    }
    // The version's own BTF where it was fetched (`bpfemu kernels fetch`): the structs a map
    // pointer or a `ptr_` register reads differ between kernels (5.10's `struct bpf_map`
    // starts with `ops`, 6.18's with `sha`). Else the running kernel's, which serves the
    // probes that need no struct (kfunc probes use id 1, no function in any kernel).
    let fetched = bpfemu_loader::kernel::profile_btf_path(version);
    let btf = match fetched.is_file() {
        true => fetched,
        false => bpfemu_loader::kernel::VMLINUX_BTF.into(),
    };
    let kernel = Kernel::named(version, Some(btf));
    let verdict = verify_probe(p, &Options::default(), &kernel);
    let mut judgement = judgement(&verdict);
    if judgement.accepted {
        judgement.message = None;
    }
    judgement
}

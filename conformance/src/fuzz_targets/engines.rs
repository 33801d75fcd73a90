//! The targets that hold the verifier and the JIT to account, over programs made from the
//! fuzzer's bytes ([`super::program`]):
//! - [`verifier_soundness`]: a program bpfemu's verifier accepts must run in the checked
//!   interpreter, over packets and map contents from the same bytes, without a memory fault or
//!   an endless run;
//! - [`verifier_vs_kernel`]: bpfemu's verdict and final error line equal the running kernel's;
//! - [`jit_vs_interp`]: the JIT (checked mode) and the interpreter give the same r0 or the
//!   same fault, and leave the same bytes in the buffer;
//! - [`trusted_vs_interp`]: a program the verifier accepts gives the same outcomes and map
//!   contents under both trusted JIT tiers (host memory, unchecked) as under the interpreter.
//!
//! Each panics on a finding, with the program's text, so that libFuzzer keeps the input.

use super::program::{self, MAP_ENTRIES, MAP_VALUE_SIZE};
use arbitrary::Unstructured;
use bpfemu_isa::{Insn, Program, RawInsn};
use bpfemu_jit::{Jit, Mode, Tier};
use bpfemu_loader::{Kernel, MapOrigin, MapSpec as LoaderMapSpec};
use bpfemu_verifier::{Options as VerifierOptions, ProgramInput, verify};
use bpfemu_vm::maps::MapSpec as VmMapSpec;
use bpfemu_vm::xdp::{MapInit, PacketError, PacketMeta, XdpConfig, XdpProgramSpec, XdpRuntime};
use bpfemu_vm::{Interpreter, NoHelpers, Options, VmError};

use bpfemu_isa::uapi::{BPF_MAP_TYPE_ARRAY, BPF_PROG_TYPE_XDP};

fn raw(insns: &[Insn]) -> Vec<RawInsn> {
    let mut out = Vec::new();
    for insn in insns {
        insn.encode_into(&mut out);
    }
    out
}

fn listing(insns: &[RawInsn]) -> String {
    Program::decode(insns.to_vec())
        .map(|p| bpfemu_isa::disasm::program_text(&p))
        .unwrap_or_else(|e| format!("(does not decode: {e})"))
}

/// The generated programs' map, as the loader would describe it.
fn loader_map() -> LoaderMapSpec {
    LoaderMapSpec {
        name: "values".into(),
        map_type: BPF_MAP_TYPE_ARRAY,
        key_size: 4,
        value_size: MAP_VALUE_SIZE,
        max_entries: MAP_ENTRIES,
        map_flags: 0,
        numa_node: 0,
        pinning: 0,
        map_extra: 0,
        key_type: None,
        value_type: None,
        inner: None,
        init_slots: Vec::new(),
        initial: None,
        origin: MapOrigin::BtfDefined,
    }
}

/// bpfemu's verdict on `insns` within `insn_limit` processed instructions: `None` when
/// accepted, else the final error line; and whether the limit was what stopped it.
fn bpfemu_verdict(insns: &[RawInsn], insn_limit: u64) -> (Option<String>, bool) {
    let verdict = bpfemu_verify(insns, insn_limit);
    let hit_limit = verdict.stats.processed_insns > insn_limit;
    // Where the kernel logs no reason, its last meaningful line comes from the log, as for
    // the kernel's side.
    let line = verdict.rejection().map(|r| {
        r.kernel_error_line().map_or_else(
            || bpfemu_kernel::verifier_error_line(&verdict.log),
            str::to_owned,
        )
    });
    (line, hit_limit)
}

/// bpfemu's verifier on `insns` within `insn_limit` processed instructions.
fn bpfemu_verify(insns: &[RawInsn], insn_limit: u64) -> bpfemu_verifier::Verdict {
    let maps = [loader_map()];
    // Judged by the running kernel, as the kernel side is; generated programs call helpers
    // only, so its BTF is never read.
    let kernel = Kernel::running();
    let input = ProgramInput::raw(BPF_PROG_TYPE_XDP, insns, &maps, &kernel);
    let opts = VerifierOptions {
        insn_limit,
        ..VerifierOptions::default()
    };
    verify(&input, &opts)
}

/// The processed-instruction limit the fuzz targets explore programs to, short of the
/// kernel's million: in a campaign's corpus, the 4% of programs that run to the million
/// took 96% of the verifier's time (0.7 s each), and they add nothing to soundness (a program
/// rejected is not run).
const QUICK_INSN_LIMIT: u64 = 100_000;

/// An accepted program must not fault in the checked interpreter.
pub fn verifier_soundness(data: &[u8]) -> bool {
    let mut u = Unstructured::new(data);
    let Some((insns, _)) = accepted_program(&mut u) else {
        return false;
    };
    let mut runtime = runtime_for(&insns, &map_contents(&mut u));
    for round in 0..4u64 {
        let (packet, meta) = packet(&mut u, round);
        if let Err(PacketError::Run { error, .. }) = runtime.run(0, &packet, &meta) {
            panic!(
                "bpfemu's verifier accepted a program that stops in the checked interpreter: \
                 {error}\n{}",
                listing(&insns)
            );
        }
    }
    true
}

/// An accepted program gives the same outcomes (verdict, packet, printk, executed count) and
/// leaves the same map contents under the trusted JIT, Cranelift's and the baseline's, which
/// reach host memory unchecked on the verifier's word, as under the interpreter.
pub fn trusted_vs_interp(data: &[u8]) -> bool {
    let mut u = Unstructured::new(data);
    let Some((insns, stack_bound)) = accepted_program(&mut u) else {
        return false;
    };
    let contents = map_contents(&mut u);
    let mut interp = runtime_for(&insns, &contents);
    // Both trusted tiers: Cranelift's and the baseline's x86-64 templates.
    let jit = Jit::new(Mode::Trusted).with_stack_bound(stack_bound);
    let mut tiers = [("cranelift", jit), ("baseline", jit.baseline())].map(|(name, jit)| {
        let mut runtime = runtime_for(&insns, &contents);
        if let Err(e) = runtime.set_engine(&jit) {
            panic!(
                "an accepted program does not compile ({name}): {e}\n{}",
                listing(&insns)
            );
        }
        (name, runtime)
    });
    for round in 0..4u64 {
        let (packet, meta) = packet(&mut u, round);
        let expected = interp.run(0, &packet, &meta);
        for (name, trusted) in &mut tiers {
            let got = trusted.run(0, &packet, &meta);
            if expected != got {
                panic!(
                    "the trusted JIT ({name}) and the interpreter disagree on packet {round}\n  \
                     interp:  {expected:?}\n  trusted: {got:?}\n{}",
                    listing(&insns)
                );
            }
        }
    }
    for key in 0..MAP_ENTRIES {
        let key = key.to_le_bytes();
        let expected = interp.maps().sys_lookup(interp.memory(), 0, &key, 0);
        for (name, trusted) in &tiers {
            let got = trusted.maps().sys_lookup(trusted.memory(), 0, &key, 0);
            if expected != got {
                panic!(
                    "the trusted JIT ({name}) and the interpreter leave different map values at \
                     key {key:?}\n  interp:  {expected:?}\n  trusted: {got:?}\n{}",
                    listing(&insns)
                );
            }
        }
    }
    true
}

/// A generated XDP program bpfemu's verifier accepts and that reads no kernel structure (map
/// internals: none to read here), with the most stack bytes a function of it uses.
fn accepted_program(u: &mut Unstructured) -> Option<(Vec<RawInsn>, u32)> {
    let insns = raw(&program::xdp_program(u).ok()?);
    let verdict = bpfemu_verify(&insns, QUICK_INSN_LIMIT);
    if !verdict.is_accepted() || verdict.reads_kernel_memory() {
        return None;
    }
    let stack_bound = verdict.stats.stack_depth.iter().copied().max().unwrap_or(0);
    Some((insns, stack_bound))
}

/// The contents of the generated programs' array map, every value in turn.
fn map_contents(u: &mut Unstructured) -> Vec<u8> {
    (0..MAP_VALUE_SIZE * MAP_ENTRIES)
        .map(|_| u.arbitrary().unwrap_or(0))
        .collect()
}

/// The interpreter's runtime for an accepted program, its map filled with `contents`.
fn runtime_for(insns: &[RawInsn], contents: &[u8]) -> XdpRuntime {
    let vm_map = VmMapSpec {
        name: "values".into(),
        map_type: BPF_MAP_TYPE_ARRAY,
        key_size: 4,
        value_size: MAP_VALUE_SIZE,
        max_entries: MAP_ENTRIES,
        ..VmMapSpec::default()
    };
    let mut runtime = match XdpRuntime::new(
        vec![XdpProgramSpec {
            name: "generated".into(),
            insns: insns.to_vec(),
        }],
        vec![(vm_map, MapInit::default())],
        XdpConfig::default(),
    ) {
        Ok(runtime) => runtime,
        Err(e) => panic!(
            "an accepted program does not prepare: {e}\n{}",
            listing(insns)
        ),
    };
    let (maps, mem) = runtime.maps_mut();
    for (key, value) in contents.chunks(MAP_VALUE_SIZE as usize).enumerate() {
        let _ = maps.sys_update(mem, 0, &(key as u32).to_le_bytes(), value, 0);
    }
    runtime
}

/// Packet `round` of a run: 14 to 128 bytes from the fuzzer's bytes.
fn packet(u: &mut Unstructured, round: u64) -> (Vec<u8>, PacketMeta) {
    let len = u.int_in_range(14usize..=128).unwrap_or(14);
    let mut packet: Vec<u8> = (0..len).map(|_| u.arbitrary().unwrap_or(0)).collect();
    packet.resize(len, 0);
    let meta = PacketMeta {
        ts_ns: round,
        ..PacketMeta::default()
    };
    (packet, meta)
}

/// The kernel's verdict with a log of messages and statistics only: a level-2 trace of a
/// program that runs to the million-instruction limit is gigabytes, slow to write, and rolls
/// over (ENOSPC, the error line lost), which the campaign took for a disagreement. A stats log
/// that still overflows is retried at the kernel's own size by
/// [`bpfemu_kernel::prog_load`].
fn kernel_verdict(insns: &[RawInsn]) -> bpfemu_kernel::LoadResult {
    use bpfemu_kernel as kernel;
    let mut opts = kernel::LoadOptions::new(BPF_PROG_TYPE_XDP, insns);
    opts.log_level = kernel::BPF_LOG_STATS;
    opts.log_size = 1 << 20;
    kernel::prog_load(&opts)
}

/// bpfemu's verdict and error line must equal the running kernel's. Without bpf() (not root,
/// no kernel) there is nothing to compare and the input is skipped.
///
/// Programs past `QUICK_INSN_LIMIT` are compared at the kernel's million one time in eight
/// (by the input's length; [`verifier_vs_kernel_every_program`] compares them all): both
/// verifiers spend up to a second on each, and a campaign would do little else.
pub fn verifier_vs_kernel(data: &[u8]) -> bool {
    compare_with_kernel(data, |len| len % 8 == 0)
}

/// [`verifier_vs_kernel`] without the sampling: what the committed corpus is held to.
pub fn verifier_vs_kernel_every_program(data: &[u8]) -> bool {
    compare_with_kernel(data, |_| true)
}

fn compare_with_kernel(data: &[u8], compare_long: impl Fn(usize) -> bool) -> bool {
    use bpfemu_kernel as kernel;
    let mut u = Unstructured::new(data);
    let Ok(insns) = program::xdp_program(&mut u) else {
        return false;
    };
    let mut insns = raw(&insns);
    let (_, long) = bpfemu_verdict(&insns, QUICK_INSN_LIMIT);
    if long && !compare_long(data.len()) {
        return false;
    }
    let (ours, _) = bpfemu_verdict(&insns, VerifierOptions::default().insn_limit);
    if !kernel::kernel_available() {
        return false;
    }
    let Ok(map) = kernel::map_create(&kernel::MapSpec::array(MAP_VALUE_SIZE, MAP_ENTRIES)) else {
        return false;
    };
    let fd = kernel::fd_imm(&map);
    for slot in insns.iter_mut() {
        // The map reference's imm is the map's index (0) for bpfemu, its fd for the kernel.
        if slot.code == 0x18 && slot.src == 1 {
            slot.imm = fd;
        }
    }
    let loaded = kernel_verdict(&insns);
    let theirs = loaded
        .fd
        .is_err()
        .then(|| bpfemu_kernel::verifier_error_line(&loaded.log));
    if ours != theirs {
        panic!(
            "bpfemu and the kernel disagree\n  kernel: {}\n  bpfemu: {}\n{}",
            theirs.as_deref().unwrap_or("accepted"),
            ours.as_deref().unwrap_or("accepted"),
            listing(&insns)
        );
    }
    true
}

/// The interpreter and the checked JIT must agree on r0 or the fault, and on the buffer.
pub fn jit_vs_interp(data: &[u8]) -> bool {
    let mut u = Unstructured::new(data);
    let Ok(insns) = program::alu_program(&mut u) else {
        return false;
    };
    let Ok(prog) = Program::from_insns(&insns) else {
        return false;
    };
    let mut buffer = [0u8; 64];
    for b in buffer.iter_mut() {
        *b = u.arbitrary().unwrap_or(0);
    }
    // A small budget: endless loops end quickly, and must end alike.
    let options = Options {
        insn_budget: 20_000,
        ..Options::default()
    };
    let mut interp_buf = buffer;
    let interp = Interpreter::new(options);
    let interp_result: Result<u64, VmError> =
        bpfemu_vm::run_on_buffer_with(&interp, &prog, &mut interp_buf, &mut NoHelpers);
    // Both tiers of checked code: Cranelift's and the baseline's.
    for tier in [Tier::Cranelift, Tier::Baseline] {
        let mut jit_buf = buffer;
        let jit = Jit::with_options(Mode::Checked, options).with_tier(tier);
        let jit_result = bpfemu_vm::run_on_buffer_with(&jit, &prog, &mut jit_buf, &mut NoHelpers);
        let same_result = match (&interp_result, &jit_result) {
            (Ok(a), Ok(b)) => a == b,
            // Faults name host addresses of different runs: compare the kind and the place.
            (Err(a), Err(b)) => same_fault(a, b),
            _ => false,
        };
        if !same_result || interp_buf != jit_buf {
            panic!(
                "the JIT ({tier:?}) and the interpreter disagree\n  interp: {interp_result:?}\n  \
                 jit:    {jit_result:?}\n  buffers equal: {}\n{}",
                interp_buf == jit_buf,
                bpfemu_isa::disasm::program_text(&prog)
            );
        }
    }
    true
}

/// The same fault: the same error at the same instruction; for memory faults the same access
/// and size (where a wild address lands depends on each engine's host layout, so the region it
/// came nearest to may differ, but an access either engine refuses is refused by both).
fn same_fault(a: &VmError, b: &VmError) -> bool {
    match (a, b) {
        (VmError::Memory { pc: pa, fault: fa }, VmError::Memory { pc: pb, fault: fb }) => {
            pa == pb && fa.access == fb.access && fa.len == fb.len
        }
        _ => a.to_string() == b.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic byte strings of every length up to `n`.
    fn inputs(n: usize) -> impl Iterator<Item = Vec<u8>> {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        (0..n).map(move |len| {
            (0..len * 2)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect()
        })
    }

    #[test]
    fn accepted_generated_programs_run_without_faults() {
        let accepted = inputs(150).filter(|data| verifier_soundness(data)).count();
        // Some must get through the verifier, or the target tests nothing.
        assert!(
            accepted > 10,
            "only {accepted} of 150 programs were accepted"
        );
    }

    #[test]
    fn the_trusted_jit_agrees_with_the_interpreter_on_accepted_programs() {
        let compared = inputs(150).filter(|data| trusted_vs_interp(data)).count();
        assert!(
            compared > 10,
            "only {compared} of 150 programs were compared"
        );
    }

    #[test]
    fn the_jit_agrees_with_the_interpreter_on_generated_programs() {
        let compared = inputs(150).filter(|data| jit_vs_interp(data)).count();
        assert!(
            compared > 100,
            "only {compared} of 150 programs were compared"
        );
    }
}

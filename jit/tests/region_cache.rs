//! Checked JIT code reaches converted ctx fields, and the region its last checked read (or
//! write) found, without calling the runtime; the runtime forgets that region whenever
//! regions may change. These programs touch the packet, then make it change under them (a
//! helper moves its bounds, a bpf-to-bpf call returns and parks its frame), then touch the
//! old place again, or load the ctx in ways it refuses: the checked JIT must fault exactly
//! where the interpreter faults, with the same message, and agree where both succeed.

use bpfemu_isa::asm::assemble_kernel;
use bpfemu_jit::{Jit, Mode, Tier};
use bpfemu_vm::xdp::{PacketMeta, XdpConfig, XdpProgramSpec, XdpRuntime};

fn runtime(text: &str) -> XdpRuntime {
    let insns = assemble_kernel(text).expect("the test program assembles");
    let programs = vec![XdpProgramSpec {
        name: "prog".into(),
        insns,
    }];
    XdpRuntime::new(programs, vec![], XdpConfig::default()).expect("the runtime builds")
}

/// Both tiers of checked code.
const TIERS: [Tier; 2] = [Tier::Cranelift, Tier::Baseline];

/// The outcome of every packet length, as text, under checked code of `tier` (`None`: the
/// interpreter).
fn outcomes(text: &str, tier: Option<Tier>) -> Vec<String> {
    let mut rt = runtime(text);
    if let Some(tier) = tier {
        let jit = Jit::new(Mode::Checked).with_tier(tier);
        rt.set_engine(&jit).expect("the JIT compiles it");
    }
    [14usize, 20, 40, 64]
        .iter()
        .map(|&len| {
            let packet: Vec<u8> = (0..len as u8).collect();
            match rt.run(0, &packet, &PacketMeta::default()) {
                Ok(o) => format!("{len}: r0={} data={:?}", o.retval, o.data_out),
                Err(e) => format!("{len}: {e}"),
            }
        })
        .collect()
}

/// Each outcome up to a fault's place: a place past a parked frame is measured from the
/// nearest live region, and where a parked frame lies depends on each runtime's allocations.
fn without_place(outcomes: Vec<String>) -> Vec<String> {
    outcomes
        .into_iter()
        .map(|o| match o.find(" at ") {
            Some(at) => o[..at].to_string(),
            None => o,
        })
        .collect()
}

fn assert_checked_jit_agrees(text: &str, expect_fault: &str) {
    let interp = without_place(outcomes(text, None));
    assert!(
        interp.iter().any(|o| o.contains(expect_fault)),
        "the program does not fault as the test means: {interp:#?}"
    );
    for tier in TIERS {
        assert_eq!(
            without_place(outcomes(text, Some(tier))),
            interp,
            "checked {tier:?}"
        );
    }
}

#[test]
fn a_read_after_adjust_head_sees_the_new_bounds() {
    // Reads packet byte 0 (the packet becomes the cached region), moves data 14 bytes on,
    // then reads the old byte 0: outside the packet's window now.
    assert_checked_jit_agrees(
        "r6 = r1
         r7 = *(u32 *)(r6 + 0)
         r0 = *(u8 *)(r7 + 0)
         r1 = r6
         r2 = 14
         call bpf_xdp_adjust_head#44
         r0 = *(u8 *)(r7 + 0)
         exit",
        "invalid read",
    );
}

#[test]
fn a_write_after_adjust_tail_sees_the_new_bounds() {
    // Writes the packet's byte 13 (cached for writes), cuts the packet to 14 bytes... then
    // to fewer than the write needs, and writes byte 13 again.
    assert_checked_jit_agrees(
        "r6 = r1
         r7 = *(u32 *)(r6 + 0)
         r1 = 7
         *(u8 *)(r7 + 13) = r1
         r8 = *(u32 *)(r6 + 4)
         r8 -= r7
         r2 = 14
         r2 -= r8
         r1 = r6
         call bpf_xdp_adjust_tail#65
         r1 = 9
         *(u8 *)(r7 + 19) = r1
         r0 = 2
         exit",
        "invalid write",
    );
}

#[test]
fn a_callee_frame_is_not_reachable_after_it_returns() {
    // The innermost function reads its caller's frame through a pointer (that frame becomes
    // the cached region); its caller then returns the pointer, its frame is parked, and the
    // entry function's read through the pointer must fault.
    assert_checked_jit_agrees(
        "r6 = r1
         call pc+2
         r0 = *(u64 *)(r0 + 0)
         exit
         r1 = 5
         *(u64 *)(r10 - 8) = r1
         r1 = r10
         r1 += -8
         call pc+3
         r0 = r10
         r0 += -8
         exit
         r0 = *(u64 *)(r1 + 0)
         exit",
        "invalid read",
    );
}

#[test]
fn ctx_loads_answered_inline_fault_where_the_interpreter_faults() {
    // Aligned fields are read inline; a misaligned word, a narrow load and a word past the
    // last field go to the runtime and fault as in the interpreter.
    for bad in [
        "r0 = *(u32 *)(r1 + 2)",
        "r0 = *(u16 *)(r1 + 0)",
        "r0 = *(u32 *)(r1 + 24)",
    ] {
        let text = format!(
            "r6 = r1
             r0 = *(u32 *)(r6 + 12)
             r2 = *(u32 *)(r6 + 16)
             r0 += r2
             {bad}
             exit"
        );
        assert_checked_jit_agrees(&text, "insn 4: invalid read");
    }
    // And where every load is a field, the same values.
    let fields = "r6 = r1
         r0 = *(u32 *)(r6 + 12)
         r2 = *(u32 *)(r6 + 4)
         r3 = *(u32 *)(r6 + 0)
         r2 -= r3
         r0 += r2
         exit";
    for tier in TIERS {
        assert_eq!(
            outcomes(fields, Some(tier)),
            outcomes(fields, None),
            "{tier:?}"
        );
    }
}

#[test]
fn an_access_that_starts_in_the_cached_region_and_ends_past_it_faults() {
    // The first packet access finds the packet for the inline path; the second starts two
    // bytes before its end and is four bytes long: the inline test must see its end too.
    assert_checked_jit_agrees(
        "r2 = *(u32 *)(r1 + 0)
         r3 = *(u32 *)(r1 + 4)
         r0 = *(u8 *)(r2 + 0)
         r3 += -2
         r0 = *(u32 *)(r3 + 0)
         exit",
        "insn 4: invalid read",
    );
    assert_checked_jit_agrees(
        "r2 = *(u32 *)(r1 + 0)
         r3 = *(u32 *)(r1 + 4)
         r0 = 1
         *(u8 *)(r2 + 0) = r0
         r3 += -2
         *(u32 *)(r3 + 0) = r0
         exit",
        "insn 5: invalid write",
    );
}

#[test]
fn an_access_just_below_the_cached_region_faults() {
    // An address below the region's start is a huge offset from it, whose end wraps: the
    // inline test must not take it for one inside.
    assert_checked_jit_agrees(
        "r2 = *(u32 *)(r1 + 0)
         r0 = *(u8 *)(r2 + 0)
         r0 = *(u32 *)(r2 - 2)
         exit",
        "insn 2: invalid read",
    );
}

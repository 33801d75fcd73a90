//! Stack frames that come back are zeroed where they were written, also between the repeats
//! of one batch (`run_again_repeated`) and where only a helper wrote. Trusted code told the
//! verifier's stack bound zeroes a frame only where the code can have written: below the
//! bound, not the whole frame. A program that reads a stack slot before it writes it (root
//! may read uninitialised stack) must see zero on every run, as in the interpreter, when the
//! bound covers its writes; a bound that does not cover them leaves the last run's bytes
//! there, which shows the bound is what decides.

use bpfemu_isa::asm::assemble_kernel;
use bpfemu_jit::{Jit, Mode, Tier};
use bpfemu_vm::Engine;
use bpfemu_vm::xdp::{PacketMeta, XdpConfig, XdpProgramSpec, XdpRuntime};

/// Trusted code of both tiers: every test runs under each.
const TIERS: [Tier; 2] = [Tier::Cranelift, Tier::Baseline];

fn trusted(tier: Tier) -> Jit {
    Jit::new(Mode::Trusted).with_tier(tier)
}

fn checked(tier: Tier) -> Jit {
    Jit::new(Mode::Checked).with_tier(tier)
}

/// r0 = the u64 at fp-16 as the run finds it, then 7 stored there through a pointer.
const READ_THEN_WRITE: &str = "r0 = *(u64 *)(r10 - 16)
     r2 = r10
     r2 += -16
     r3 = 7
     *(u64 *)(r2 + 0) = r3
     exit";

/// A runtime of the program `text` under `engine` (`None`: the interpreter).
fn runtime(text: &str, engine: Option<&dyn Engine>) -> XdpRuntime {
    let insns = assemble_kernel(text).expect("assembles");
    let programs = vec![XdpProgramSpec {
        name: "prog".into(),
        insns,
    }];
    let mut rt = XdpRuntime::new(programs, vec![], XdpConfig::default()).expect("builds");
    if let Some(engine) = engine {
        rt.set_engine(engine).expect("compiles");
    }
    rt
}

fn r0_of_three_runs(engine: Option<&dyn Engine>) -> Vec<u32> {
    let mut rt = runtime(READ_THEN_WRITE, engine);
    (0..3)
        .map(|_| {
            rt.run(0, &[0u8; 64], &PacketMeta::default())
                .unwrap()
                .retval
        })
        .collect()
}

#[test]
fn a_bound_that_covers_the_writes_zeroes_them() {
    assert_eq!(r0_of_three_runs(None), [0, 0, 0]);
    for tier in TIERS {
        for bound in [16, 24, 512] {
            let jit = trusted(tier).with_stack_bound(bound);
            assert_eq!(
                r0_of_three_runs(Some(&jit)),
                [0, 0, 0],
                "bound {bound} {tier:?}"
            );
        }
        // Without a bound the whole frame is zeroed (a store through a pointer).
        assert_eq!(r0_of_three_runs(Some(&trusted(tier))), [0, 0, 0]);
    }
}

#[test]
fn the_bound_decides_what_is_zeroed() {
    for tier in TIERS {
        let too_small = trusted(tier).with_stack_bound(8);
        assert_eq!(r0_of_three_runs(Some(&too_small)), [0, 7, 7], "{tier:?}");
    }
    // Checked code is never bounded: nobody verified it.
    for tier in TIERS {
        let checked = checked(tier).with_stack_bound(8);
        assert_eq!(
            r0_of_three_runs(Some(&checked)),
            [0, 0, 0],
            "checked {tier:?}"
        );
    }
}

/// r0 = the u64 at fp-16 as the run finds it, then bpf_xdp_load_bytes writes the packet's
/// first 8 bytes there: the helper's write, which only the memory sees.
const READ_THEN_HELPER_WRITES: &str = "r7 = r1
     r6 = *(u64 *)(r10 - 16)
     r1 = r7
     r2 = 0
     r3 = r10
     r3 += -16
     r4 = 8
     call bpf_xdp_load_bytes#189
     r0 = r6
     exit";

/// The last run's r0 after one run and then `times` more in one call
/// (`run_again_repeated`, test_run's repeats), under `engine`.
fn r0_after_repeats(text: &str, engine: Option<&dyn Engine>, times: u64) -> u32 {
    let mut rt = runtime(text, engine);
    let meta = PacketMeta::default();
    rt.run(0, &[0x5a; 64], &meta).expect("runs");
    rt.run_again_repeated(0, &meta, times).unwrap().retval
}

#[test]
fn repeated_runs_find_their_frame_zeroed() {
    for (text, tier) in [READ_THEN_WRITE, READ_THEN_HELPER_WRITES]
        .into_iter()
        .flat_map(|text| TIERS.map(|tier| (text, tier)))
    {
        let trusted = trusted(tier);
        let bounded = trusted.with_stack_bound(16);
        let checked = checked(tier);
        let engines: [Option<&dyn Engine>; 4] =
            [None, Some(&trusted), Some(&bounded), Some(&checked)];
        for engine in engines {
            assert_eq!(r0_after_repeats(text, engine, 3), 0, "{text} {tier:?}");
        }
    }
}

/// Two calls of one function at the same depth: it returns the u64 at its fp-8 as it finds
/// it, then stores 7 there; the main function returns the second call's r0 plus ten times
/// the first's. Trusted code keeps a depth's frame for the whole batch and zeroes it inline
/// at each call: the second call must find zero as in the interpreter, where the frame is a
/// fresh one.
const CALLEE_READS_THEN_WRITES: &str = "call pc+6
     r6 = r0
     call pc+4
     r6 *= 10
     r0 += r6
     exit
     exit
     r0 = *(u64 *)(r10 - 8)
     r1 = 7
     *(u64 *)(r10 - 8) = r1
     exit";

/// As above, but the callee's stack is written by a helper (bpf_xdp_load_bytes of the
/// packet's first 8 bytes), which trusted code never sees.
const CALLEE_READS_THEN_HELPER_WRITES: &str = "r7 = r1
     r1 = r7
     call pc+7
     r6 = r0
     r1 = r7
     call pc+4
     r6 *= 10
     r0 += r6
     exit
     exit
     r6 = *(u64 *)(r10 - 8)
     r2 = 0
     r3 = r10
     r3 += -8
     r4 = 8
     call bpf_xdp_load_bytes#189
     r0 = r6
     exit";

#[test]
fn a_call_finds_its_frame_zeroed_where_the_last_call_at_its_depth_wrote() {
    for (text, tier) in [CALLEE_READS_THEN_WRITES, CALLEE_READS_THEN_HELPER_WRITES]
        .into_iter()
        .flat_map(|text| TIERS.map(|tier| (text, tier)))
    {
        // 16: the fast path inline; none: the whole frame, through the runtime.
        let inline = trusted(tier).with_stack_bound(16);
        let runtime_zeroed = trusted(tier);
        let checked = checked(tier);
        let engines: [Option<&dyn Engine>; 4] =
            [None, Some(&inline), Some(&runtime_zeroed), Some(&checked)];
        for (i, engine) in engines.into_iter().enumerate() {
            assert_eq!(
                r0_of_runs(text, engine, 2),
                [0, 0],
                "engine {i} {tier:?}: {text}"
            );
            assert_eq!(
                r0_after_repeats(text, engine, 3),
                0,
                "engine {i} {tier:?}: {text}"
            );
        }
    }
    // A bound that does not cover the callee's writes leaves them for the next call at its
    // depth in the batch (the frame is kept from run to run): the bound is what trusted code
    // zeroes by. After the batch's first run, every run finds 7 in both calls (r0 7 + 10 * 7).
    for tier in TIERS {
        let too_small = trusted(tier).with_stack_bound(0);
        assert_eq!(
            r0_after_repeats(CALLEE_READS_THEN_WRITES, Some(&too_small), 3),
            77,
            "{tier:?}"
        );
    }
}

fn r0_of_runs(text: &str, engine: Option<&dyn Engine>, runs: usize) -> Vec<u32> {
    let mut rt = runtime(text, engine);
    (0..runs)
        .map(|_| {
            rt.run(0, &[0x5a; 64], &PacketMeta::default())
                .unwrap()
                .retval
        })
        .collect()
}

/// A function that calls itself: the ninth frame is one too many, and trusted code (which
/// enters frames inline) stops where the interpreter does, with the same error.
#[test]
fn too_deep_a_call_stops_as_in_the_interpreter() {
    let text = "r0 = 0
     call pc-2
     exit";
    let error_of = |engine: Option<&dyn Engine>| {
        let mut rt = runtime(text, engine);
        rt.run(0, &[0u8; 64], &PacketMeta::default())
            .map(|o| o.retval)
            .map_err(|e| e.to_string())
    };
    let expected = error_of(None);
    assert!(
        expected.as_ref().is_err_and(|e| e.contains("call")),
        "{expected:?}"
    );
    for (bound, tier) in [Some(16), None]
        .into_iter()
        .flat_map(|bound| TIERS.map(|tier| (bound, tier)))
    {
        let jit = match bound {
            Some(bytes) => trusted(tier).with_stack_bound(bytes),
            None => trusted(tier),
        };
        assert_eq!(error_of(Some(&jit)), expected, "bound {bound:?} {tier:?}");
    }
    // Checked code gets a frame per call from the runtime, which stops it in the same place.
    for tier in TIERS {
        assert_eq!(error_of(Some(&checked(tier))), expected, "checked {tier:?}");
    }
}

//! Stack frames that come back are zeroed where they were written, also between the repeats
//! of one batch (`run_again_repeated`) and where only a helper wrote. Trusted code told the
//! verifier's stack bound zeroes a frame only where the code can have written: below the
//! bound, not the whole frame. A program that reads a stack slot before it writes it (root
//! may read uninitialised stack) must see zero on every run, as in the interpreter, when the
//! bound covers its writes; a bound that does not cover them leaves the last run's bytes
//! there, which shows the bound is what decides.

use bpfemu_isa::asm::assemble_kernel;
use bpfemu_jit::{Jit, Mode};
use bpfemu_vm::Engine;
use bpfemu_vm::xdp::{PacketMeta, XdpConfig, XdpProgramSpec, XdpRuntime};

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
    for bound in [16, 24, 512] {
        let jit = Jit::new(Mode::Trusted).with_stack_bound(bound);
        assert_eq!(r0_of_three_runs(Some(&jit)), [0, 0, 0], "bound {bound}");
    }
    // Without a bound the whole frame is zeroed (a store through a pointer).
    assert_eq!(r0_of_three_runs(Some(&Jit::new(Mode::Trusted))), [0, 0, 0]);
}

#[test]
fn the_bound_decides_what_is_zeroed() {
    let too_small = Jit::new(Mode::Trusted).with_stack_bound(8);
    assert_eq!(r0_of_three_runs(Some(&too_small)), [0, 7, 7]);
    // Checked code is never bounded: nobody verified it.
    let checked = Jit::new(Mode::Checked).with_stack_bound(8);
    assert_eq!(r0_of_three_runs(Some(&checked)), [0, 0, 0]);
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
    for text in [READ_THEN_WRITE, READ_THEN_HELPER_WRITES] {
        let trusted = Jit::new(Mode::Trusted);
        let bounded = Jit::new(Mode::Trusted).with_stack_bound(16);
        let checked = Jit::new(Mode::Checked);
        let engines: [Option<&dyn Engine>; 4] =
            [None, Some(&trusted), Some(&bounded), Some(&checked)];
        for engine in engines {
            assert_eq!(r0_after_repeats(text, engine, 3), 0, "{text}");
        }
    }
}

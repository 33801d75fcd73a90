//! The inlined helpers (`bpf_map_lookup_elem` on ARRAY and PERCPU_ARRAY, and
//! `bpf_get_smp_processor_id`) give what the interpreter's helper calls give: the same verdicts,
//! instruction counts, faults and map contents, for keys in and out of range, keys on the
//! stack and in the packet, on several virtual CPUs, in checked and trusted mode; and a lookup
//! the translator cannot tie to one map (r1 set on two paths) still goes through the helper.

mod common;

use bpfemu_isa::RawInsn;
use bpfemu_jit::{Jit, Mode, Tier};
use bpfemu_vm::maps::{MapSpec, MapType};
use bpfemu_vm::xdp::{MapInit, PacketMeta, XdpConfig, XdpProgramSpec, XdpRuntime};
use common::program;

const CPUS: u32 = 3;

fn runtime(insns: &[RawInsn], value_size: u32) -> XdpRuntime {
    let maps = vec![
        (
            MapSpec::new("plain", MapType::Array, 4, value_size, 8),
            MapInit::default(),
        ),
        (
            MapSpec::new("per_cpu", MapType::PercpuArray, 4, value_size, 8),
            MapInit::default(),
        ),
    ];
    let programs = vec![XdpProgramSpec {
        name: "prog".into(),
        insns: insns.to_vec(),
    }];
    let cfg = XdpConfig {
        cpus: CPUS,
        ..XdpConfig::default()
    };
    XdpRuntime::new(programs, maps, cfg).expect("the runtime builds")
}

/// Every packet's result on every CPU, then both maps' contents, as text.
fn results(insns: &[RawInsn], value_size: u32, jit: Option<Jit>) -> Vec<String> {
    let mut rt = runtime(insns, value_size);
    if let Some(jit) = jit {
        rt.set_engine(&jit).expect("the JIT compiles it");
    }
    let mut out = Vec::new();
    for key_byte in [0u8, 1, 5, 7, 8, 9, 200, 255] {
        for cpu in 0..CPUS {
            let mut packet = vec![0u8; 64];
            packet[14] = key_byte;
            let meta = PacketMeta {
                cpu,
                ..PacketMeta::default()
            };
            out.push(match rt.run(0, &packet, &meta) {
                Ok(o) => format!("{key_byte}@{cpu}: {} in {}", o.retval, o.insns_executed),
                Err(e) => format!("{key_byte}@{cpu}: {e}"),
            });
        }
    }
    let (maps, mem) = rt.maps_mut();
    for index in 0..2 {
        for key in 0u32..8 {
            let v = maps.sys_lookup(mem, index, &key.to_ne_bytes(), 0);
            out.push(format!("map {index} key {key}: {v:?}"));
        }
    }
    out
}

fn agree(text: &str, value_size: u32, modes: &[Mode]) {
    let insns = program(text);
    let interp = results(&insns, value_size, None);
    assert!(interp.iter().any(|r| r.contains(": 2 in")), "{interp:#?}");
    for &mode in modes {
        // Both tiers, in each mode.
        for tier in [Tier::Cranelift, Tier::Baseline] {
            let jit = results(&insns, value_size, Some(Jit::new(mode).with_tier(tier)));
            assert_eq!(jit, interp, "{mode:?} {tier:?}");
        }
    }
}

/// Counts into element `packet[14]` of map `MAP` (its key on the stack): 1 + the CPU is added
/// to the value, r0 is 2 (XDP_PASS) on a hit and 1 on a miss.
fn count_on_stack(map: u32) -> String {
    format!(
        "r2 = *(u32 *)(r1 +0)
         r3 = *(u32 *)(r1 +4)
         r4 = r2
         r4 += 16
         if r4 > r3 goto out
         r6 = *(u8 *)(r2 +14)
         *(u32 *)(r10 -4) = r6
         r2 = r10
         r2 += -4
         r1 = 0xf00d000{map} ll
         call map_lookup_elem#1
         if r0 == 0 goto miss
         r7 = r0
         call get_smp_processor_id#8
         r0 += 1
         r1 = *(u64 *)(r7 +0)
         r1 += r0
         *(u64 *)(r7 +0) = r1
         r0 = 2
         exit
         miss:
         r0 = 1
         exit
         out:
         r0 = 0
         exit"
    )
}

#[test]
fn array_lookups_on_the_stack_agree() {
    agree(&count_on_stack(0), 8, &[Mode::Checked, Mode::Trusted]);
    // An odd value size: slots are 8-byte aligned (round_up(12, 8) = 16).
    agree(&count_on_stack(0), 12, &[Mode::Checked, Mode::Trusted]);
}

#[test]
fn per_cpu_array_lookups_agree() {
    agree(&count_on_stack(1), 8, &[Mode::Checked, Mode::Trusted]);
    agree(&count_on_stack(1), 20, &[Mode::Checked, Mode::Trusted]);
}

/// The key in the packet: checked mode leaves the key check to the helper.
#[test]
fn a_key_in_the_packet_agrees() {
    let text = "r2 = *(u32 *)(r1 +0)
         r3 = *(u32 *)(r1 +4)
         r4 = r2
         r4 += 20
         if r4 > r3 goto out
         r2 += 14
         r1 = 0xf00d0001 ll
         call map_lookup_elem#1
         if r0 == 0 goto miss
         r1 = 1
         lock *(u64 *)(r0 +0) += r1
         r0 = 2
         exit
         miss:
         r0 = 1
         exit
         out:
         r0 = 0
         exit";
    agree(text, 8, &[Mode::Checked, Mode::Trusted]);
}

/// A bad key pointer (what the verifier would refuse): checked mode reports the helper's
/// fault, as the interpreter does.
#[test]
fn a_bad_key_pointer_faults_alike() {
    let text = "r2 = *(u32 *)(r1 +0)
         r3 = *(u32 *)(r1 +4)
         r4 = r2
         r4 += 16
         if r4 > r3 goto out
         r6 = *(u8 *)(r2 +14)
         r2 = r10
         r2 += 8
         if r6 > 100 goto lookup
         r2 += -12
         lookup:
         r1 = 0xf00d0000 ll
         call map_lookup_elem#1
         r0 = 2
         exit
         out:
         r0 = 0
         exit";
    let insns = program(text);
    let interp = results(&insns, 8, None);
    assert!(interp.iter().any(|r| r.contains("stopped")), "{interp:#?}");
    for tier in [Tier::Cranelift, Tier::Baseline] {
        let jit = Jit::new(Mode::Checked).with_tier(tier);
        assert_eq!(results(&insns, 8, Some(jit)), interp, "{tier:?}");
    }
}

/// r1 holds one of two maps depending on the packet: the translator knows neither, and the
/// helper decides.
#[test]
fn a_map_chosen_at_run_time_agrees() {
    let text = "r2 = *(u32 *)(r1 +0)
         r3 = *(u32 *)(r1 +4)
         r4 = r2
         r4 += 16
         if r4 > r3 goto out
         r6 = *(u8 *)(r2 +14)
         *(u32 *)(r10 -4) = r6
         r1 = 0xf00d0000 ll
         if r6 > 4 goto lookup
         r1 = 0xf00d0001 ll
         lookup:
         r2 = r10
         r2 += -4
         call map_lookup_elem#1
         if r0 == 0 goto miss
         r1 = *(u64 *)(r0 +0)
         r1 += 3
         *(u64 *)(r0 +0) = r1
         r0 = 2
         exit
         miss:
         r0 = 1
         exit
         out:
         r0 = 0
         exit";
    agree(text, 8, &[Mode::Checked, Mode::Trusted]);
}

/// `bpf_loop` with its callback and zero flags set just before the call: trusted Cranelift
/// code runs it as a loop of calls (the kernel's inline form), the other tiers and modes call
/// the helper. Every packet's verdict and instruction count agree, for loop counts of none,
/// a few, a stop inside the loop, `BPF_MAX_LOOPS` and past it (E2BIG by a 32-bit move) and
/// with the upper 32 bits set; so do the budget's stops inside a callback.
#[test]
fn bpf_loop_run_as_a_loop_agrees() {
    // r1 = the packet's u64 at 14 (or 1 << 23 + 1 on an odd byte 22), the callback stops
    // when its index equals byte 23; r0 = the loop's answer, its low byte the verdict.
    let main = "r2 = *(u32 *)(r1 +0)
         r3 = *(u32 *)(r1 +4)
         r4 = r2
         r4 += 24
         if r4 > r3 goto out
         r6 = *(u64 *)(r2 +14)
         r7 = *(u8 *)(r2 +23)
         *(u64 *)(r10 -8) = r7
         r1 = r6
         r2 = 0xca11 ll
         r3 = r10
         r3 += -8
         r4 = 0
         call loop#181
         r1 = r0
         r1 >>= 32
         r0 += r1
         r0 &= 3
         exit
         out:
         r0 = 0
         exit";
    let callback = "r2 = *(u64 *)(r2 +0)
         r0 = 0
         if r1 != r2 goto on
         r0 = 1
         on:
         exit";
    let mut insns = program(main);
    let callback_at = insns.len() as i32;
    insns.extend(program(callback));
    let ld = insns
        .iter()
        .position(|i| i.code == 0x18 && i.imm == 0xca11)
        .expect("the callback's ld_imm64");
    insns[ld].src = 4;
    insns[ld].imm = callback_at - ld as i32 - 1;

    let packets: Vec<(u64, u8)> = vec![
        (0, 0),
        (1, 0),
        (7, 3),
        (7, 200),
        (1 << 23, 2),
        ((1 << 23) + 1, 0),
        (0x1_0000_0003, 255),
        (u64::MAX, 1),
    ];
    let run = |jit: Option<Jit>, budget: u64| -> Vec<String> {
        let programs = vec![XdpProgramSpec {
            name: "prog".into(),
            insns: insns.clone(),
        }];
        let cfg = XdpConfig {
            insn_budget: budget,
            ..XdpConfig::default()
        };
        let mut rt = XdpRuntime::new(programs, vec![], cfg).expect("the runtime builds");
        if let Some(jit) = jit {
            rt.set_engine(&jit).expect("the JIT compiles it");
        }
        packets
            .iter()
            .map(|&(nr, stop)| {
                let mut packet = vec![0u8; 64];
                packet[14..22].copy_from_slice(&nr.to_le_bytes());
                packet[23] = stop;
                match rt.run(0, &packet, &PacketMeta::default()) {
                    Ok(o) => format!("{nr:#x}/{stop}: {} in {}", o.retval, o.insns_executed),
                    Err(e) => format!("{nr:#x}/{stop}: {e}"),
                }
            })
            .collect()
    };
    for budget in [1 << 30, 40] {
        let interp = run(None, budget);
        assert!(
            interp.iter().any(|r| r.contains("in 2")),
            "the loop runs: {interp:#?}"
        );
        for mode in [Mode::Checked, Mode::Trusted] {
            for tier in [Tier::Cranelift, Tier::Baseline] {
                let jit = run(Some(Jit::new(mode).with_tier(tier)), budget);
                assert_eq!(jit, interp, "{mode:?} {tier:?} budget {budget}");
            }
        }
    }
}

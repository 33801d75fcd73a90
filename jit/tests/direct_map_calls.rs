//! Trusted code calls `bpf_map_lookup_elem`, `bpf_map_update_elem`, `bpf_map_delete_elem`
//! and `bpf_redirect_map` directly ([`bpfemu_vm::Helpers::map_op_direct`]), with the general
//! helper call as the slow path of what the environment declines; checked code always makes
//! the general call. Both tiers. On real maps of every kind a program updates, looks up and
//! deletes, the direct calls give what the interpreter gives: verdicts, instruction counts and
//! map contents.

mod common;

use bpfemu_isa::Program;
use bpfemu_isa::asm::assemble_kernel;
use bpfemu_jit::{Jit, Mode, Tier};
use bpfemu_vm::maps::{MapSpec, MapType};
use bpfemu_vm::xdp::{MapInit, PacketMeta, XdpConfig, XdpProgramSpec, XdpRuntime};
use bpfemu_vm::{Engine, HelperError, Helpers, MapOp, Memory};
use common::program;

const TIERS: [Tier; 2] = [Tier::Cranelift, Tier::Baseline];

/// Answers the general call with one value per helper and the direct call with another, for
/// key 1 only: which path ran shows in r0.
struct TwoPaths;

const GENERAL_LOOKUP: u64 = 7000;
const GENERAL_UPDATE: u64 = 5000;
const GENERAL_REDIRECT: u64 = 300_000;
const DIRECT_LOOKUP: u64 = 40;
const DIRECT_REDIRECT: u64 = 20_000;

impl Helpers for TwoPaths {
    fn call(&mut self, id: i32, _args: [u64; 5], _mem: &mut Memory) -> Result<u64, HelperError> {
        match id {
            1 => Ok(GENERAL_LOOKUP),
            2 => Ok(GENERAL_UPDATE),
            51 => Ok(GENERAL_REDIRECT),
            _ => Err(HelperError::Unknown(id)),
        }
    }

    fn map_op_direct(&mut self, op: MapOp, args: [u64; 4], _mem: &mut Memory) -> Option<u64> {
        match op {
            _ if args[1] != 1 => None,
            MapOp::Lookup => Some(DIRECT_LOOKUP),
            // The flags: r4 reached the direct call.
            MapOp::Update => Some(args[3]),
            // The flags, r3, reached it too.
            MapOp::Redirect => Some(DIRECT_REDIRECT + args[2]),
            MapOp::Delete => None,
        }
    }
}

/// A lookup, an update and a redirect with r2 (the "key") from the caller; r0 adds the
/// results and r2 and r4 as they are after the calls (r1-r5 survive a helper call).
const ROUTED: &str = "
    r1 = 100
    call map_lookup_elem#1
    r0 += r2
    r6 = r0
    r1 = 100
    r3 = 9
    r4 = 3
    call map_update_elem#2
    r0 += r4
    r6 += r0
    r1 = 100
    r3 = 5
    call redirect_map#51
    r0 += r6
    exit";

fn routed(mode: Mode, tier: Tier, key: u64) -> u64 {
    let prog = Program::decode(assemble_kernel(ROUTED).expect("assembles")).expect("decodes");
    let jit = Jit::new(mode).with_tier(tier);
    let mut exe = jit.prepare(&prog).expect("compiles");
    let mut mem = Memory::new();
    exe.run([0, key, 0, 0, 0], &mut mem, &mut TwoPaths)
        .expect("runs")
}

#[test]
fn trusted_code_calls_map_helpers_directly_and_falls_back_when_declined() {
    for tier in TIERS {
        // Key 1: all direct (the update answers its flags, 3; the redirect its own, 5).
        assert_eq!(
            routed(Mode::Trusted, tier, 1),
            (DIRECT_LOOKUP + 1) + (3 + 3) + (DIRECT_REDIRECT + 5),
            "{tier:?}"
        );
        // Key 2: all declined, so all general.
        assert_eq!(
            routed(Mode::Trusted, tier, 2),
            (GENERAL_LOOKUP + 2) + (GENERAL_UPDATE + 3) + GENERAL_REDIRECT,
            "{tier:?}"
        );
        // Checked code never calls directly.
        assert_eq!(
            routed(Mode::Checked, tier, 1),
            (GENERAL_LOOKUP + 1) + (GENERAL_UPDATE + 3) + GENERAL_REDIRECT,
            "{tier:?}"
        );
    }
}

const CPUS: u32 = 2;

/// One map of each kind the direct calls serve, 8-byte keys and values (LPM: a 4-byte prefix
/// length then 4 bytes of data), room for 4 elements so that updates fail with E2BIG and LRU
/// maps evict.
fn maps() -> Vec<(MapSpec, MapInit)> {
    [
        MapType::Hash,
        MapType::PercpuHash,
        MapType::LruHash,
        MapType::LruPercpuHash,
        MapType::LpmTrie,
    ]
    .into_iter()
    .enumerate()
    .map(|(i, t)| {
        let mut spec = MapSpec::new(&format!("m{i}"), t, 8, 8, 4);
        if t == MapType::LpmTrie {
            spec.map_flags = 1; // BPF_F_NO_PREALLOC, which the kernel requires
        }
        (spec, MapInit::default())
    })
    .collect()
}

/// For map `map`: the packet's bytes 14 and 15 pick the key and the operation. The key is
/// `{32, byte 14}` on the stack (an LPM key of a /32); op 0 looks up and adds the value to r0,
/// 1 updates with flags `byte 15 >> 4` (BPF_ANY, NOEXIST, EXIST), 2 deletes; r0 carries
/// each result, so that the verdict shows it.
fn program_for(map: usize) -> String {
    format!(
        "r2 = *(u32 *)(r1 +0)
         r3 = *(u32 *)(r1 +4)
         r4 = r2
         r4 += 16
         if r4 > r3 goto out
         r6 = *(u8 *)(r2 +14)
         r7 = *(u8 *)(r2 +15)
         *(u32 *)(r10 -8) = 32
         *(u32 *)(r10 -4) = r6
         *(u64 *)(r10 -16) = r6
         r2 = r10
         r2 += -8
         r1 = 0xf00d000{map} ll
         r8 = r7
         r8 &= 15
         if r8 == 1 goto update
         if r8 == 2 goto delete
         call map_lookup_elem#1
         if r0 == 0 goto out
         r0 = *(u64 *)(r0 +0)
         r0 &= 0xff
         r0 += 100
         exit
         update:
         r3 = r10
         r3 += -16
         r4 = r7
         r4 >>= 4
         call map_update_elem#2
         r0 += 50
         r0 &= 0xffff
         exit
         delete:
         call map_delete_elem#3
         r0 += 50
         r0 &= 0xffff
         exit
         out:
         r0 = 2
         exit"
    )
}

/// Every packet's result in a fixed sequence of operations on every CPU, then each map's
/// contents for the keys used, as text.
fn results(map: usize, jit: Option<Jit>) -> Vec<String> {
    let programs = vec![XdpProgramSpec {
        name: "prog".into(),
        insns: program(&program_for(map)),
    }];
    let cfg = XdpConfig {
        cpus: CPUS,
        ..XdpConfig::default()
    };
    let mut rt = XdpRuntime::new(programs, maps(), cfg).expect("the runtime builds");
    if let Some(jit) = jit {
        rt.set_engine(&jit).expect("the JIT compiles it");
    }
    let mut out = Vec::new();
    let ops: &[(u8, u8)] = &[
        (3, 0x01),
        (3, 0x11),
        (3, 0x00),
        (4, 0x21),
        (5, 0x01),
        (6, 0x01),
        (7, 0x01),
        (8, 0x01),
        (3, 0x00),
        (4, 0x21),
        (4, 0x02),
        (4, 0x02),
        (9, 0x01),
        (9, 0x00),
        (0, 0x00),
    ];
    for &(key, op) in ops {
        for cpu in 0..CPUS {
            let mut packet = vec![0u8; 64];
            packet[14] = key;
            packet[15] = op;
            let meta = PacketMeta {
                cpu,
                ..PacketMeta::default()
            };
            out.push(match rt.run(0, &packet, &meta) {
                Ok(o) => format!("{key}/{op:#x}@{cpu}: {} in {}", o.retval, o.insns_executed),
                Err(e) => format!("{key}/{op:#x}@{cpu}: {e}"),
            });
        }
    }
    let (maps, mem) = rt.maps_mut();
    for key in 0u32..10 {
        let mut bytes = 32u32.to_ne_bytes().to_vec();
        bytes.extend_from_slice(&key.to_ne_bytes());
        let v = maps.sys_lookup(mem, map, &bytes, 0);
        out.push(format!("key {key}: {v:?}"));
    }
    out
}

#[test]
fn direct_map_calls_give_what_the_interpreter_gives_on_every_map_kind() {
    for (map, (spec, _)) in maps().iter().enumerate() {
        let interp = results(map, None);
        // The sequence reaches both an update that succeeds and one that fails.
        assert!(interp.iter().any(|r| r.contains(": 50 in")), "{interp:#?}");
        for mode in [Mode::Trusted, Mode::Checked] {
            for tier in TIERS {
                let jit = results(map, Some(Jit::new(mode).with_tier(tier)));
                assert_eq!(jit, interp, "{:?} {mode:?} {tier:?}", spec.map_type);
            }
        }
    }
}

//! Soundness: a program bpfemu's verifier accepts must never fault when it runs. Each accepted
//! program runs in bpfemu's checked interpreter over random packets and random map contents; a
//! memory fault (or a jump out of the program, a fall off its end) is a verifier bug.

use super::probe::ProbeMap;
use bpfemu_isa::RawInsn;
use bpfemu_loader::Kernel;
use bpfemu_vm::xdp::{MapInit, PacketError, PacketMeta, XdpConfig, XdpProgramSpec, XdpRuntime};
use bpfemu_vm::{MapSpec, VmError};

/// The workspace's xorshift64* generator, so that a failure replays from its seed.
pub use bpfemu_vm::rng::Rng;

fn vm_spec(m: &ProbeMap) -> MapSpec {
    MapSpec {
        name: m.name.clone(),
        map_type: m.map_type,
        key_size: m.key_size,
        value_size: m.value_size,
        max_entries: m.max_entries,
        map_flags: m.map_flags,
        numa_node: 0,
        map_extra: 0,
        inner: None,
        spin_lock_off: m
            .special
            .iter()
            .find(|(kind, _)| *kind == "bpf_spin_lock")
            .map(|&(_, off)| off),
        global_section: None,
    }
}

/// Whether a run's error means the verifier let something unsafe through.
pub fn is_unsafe(error: &VmError) -> bool {
    matches!(
        error,
        VmError::Memory { .. }
            | VmError::JumpOutOfProgram { .. }
            | VmError::JumpIntoLdImm64 { .. }
            | VmError::FellOffEnd { .. }
    )
}

/// Fills array maps with random values and hash maps with a few random entries (key 0 among
/// them), so that lookups find values with arbitrary contents.
fn randomize_maps(rt: &mut XdpRuntime, maps: &[ProbeMap], rng: &mut Rng) {
    let (registry, mem) = rt.maps_mut();
    let env = registry.env().clone();
    for (index, m) in maps.iter().enumerate() {
        let Some(map) = registry.get_mut(index) else {
            continue;
        };
        if m.frozen.is_some() {
            continue;
        }
        let keys: Vec<Vec<u8>> = match m.map_type {
            2 | 6 => (0..m.max_entries.min(64))
                .map(|i| i.to_le_bytes().to_vec())
                .collect(),
            1 | 5 | 9 => (0..4)
                .map(|i| {
                    let mut key = vec![0u8; m.key_size as usize];
                    if i > 0 {
                        key = rng.bytes(m.key_size as usize);
                    }
                    key
                })
                .collect(),
            _ => continue,
        };
        for key in keys {
            let value = rng.bytes(m.value_size as usize);
            // A full map or a refused value is fine: the contents are only a test input.
            let _ = map.update(mem, &env, &key, &value, 0, 0);
        }
    }
}

/// Runs the program on `packets` random packets (14 to 300 bytes) with random map contents;
/// `Err` names the first unsafe run. Programs the runtime cannot prepare (a helper bpfemu
/// does not implement) are not run: `Ok(false)`. Its kfunc calls are named from `kernel`'s
/// BTF, the one it was verified against.
pub fn run_randomly(
    insns: &[RawInsn],
    maps: &[ProbeMap],
    seed: u64,
    packets: usize,
    kernel: &Kernel,
) -> Result<bool, String> {
    let specs: Vec<(MapSpec, MapInit)> = maps
        .iter()
        .map(|m| {
            let init = MapInit {
                data: m.frozen.clone(),
                ..MapInit::default()
            };
            (vm_spec(m), init)
        })
        .collect();
    let program = XdpProgramSpec {
        name: "prog".into(),
        insns: insns.to_vec(),
    };
    // A budget well under the kernel's: a may_goto loop runs 8M iterations, which only costs
    // time here; running out of budget is no fault.
    let cfg = XdpConfig {
        seed,
        insn_budget: 100_000,
        kfunc_names: kernel.kfunc_names([insns]).map_err(|e| e.to_string()),
        ..XdpConfig::default()
    };
    let Ok(mut rt) = XdpRuntime::new(vec![program], specs, cfg) else {
        return Ok(false);
    };
    if rt.runnable(0).is_err() {
        return Ok(false);
    }
    let mut rng = Rng::new(seed);
    for n in 0..packets {
        if n % 4 == 0 {
            randomize_maps(&mut rt, maps, &mut rng);
        }
        let len = 14 + rng.below(287) as usize;
        let packet = rng.bytes(len);
        let meta = PacketMeta {
            rx_queue_index: rng.below(4) as u32,
            ..PacketMeta::default()
        };
        match rt.run(0, &packet, &meta) {
            Err(PacketError::Run { error, .. }) if is_unsafe(&error) => {
                return Err(format!("packet {n} ({len} bytes, seed {seed}): {error}"));
            }
            _ => {}
        }
    }
    Ok(true)
}

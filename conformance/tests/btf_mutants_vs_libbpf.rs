//! An object's BTF as libbpf 1.7 and the kernel take it, against bpfemu's model of both, on
//! mutants of the repository's objects: each mutant is an object whose `.BTF` type section
//! has one or two words changed. libbpf opens it (its own BTF checks) and loads it with no
//! program (sanitised BTF into the kernel, maps created); bpfemu's loader reads it and
//! `Btf::kernel_refusal` says whether the kernel takes its BTF. The two must reach the same
//! one of: object refused, loaded without BTF in the kernel, loaded with it. A model that
//! takes BTF the kernel refuses verifies a program with func_info and map BTF that the
//! kernel then loads without (global functions verified as static ones, spin locks refused):
//! a false green; a parser stricter than libbpf's is a false reject.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu_conformance::libbpf::{LibbpfObject, LogOptions, MapInfo, kernel_or_skip};
use bpfemu_loader::LoadOptions;
use std::path::{Path, PathBuf};

/// Mutants per object.
const MUTANTS: usize = 40;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Refused,
    WithoutBtf,
    WithBtf,
}

fn objects() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found: Vec<PathBuf> = [
        "examples/xdp/build",
        "tests/data/verify",
        "tests/data/kernels",
    ]
    .iter()
    .flat_map(|dir| std::fs::read_dir(root.join(dir)).expect("test objects"))
    .map(|e| e.expect("directory entry").path())
    .filter(|p| p.extension().is_some_and(|x| x == "o"))
    .collect();
    found.sort();
    found
}

/// Where the `.BTF` type section lies in an object: the blob is the one whose header is 24
/// bytes (`.BTF.ext`'s is longer).
fn btf_types(elf: &[u8]) -> Option<std::ops::Range<usize>> {
    let magic = [0x9f, 0xeb, 1, 0, 24, 0, 0, 0];
    let at = elf.windows(magic.len()).position(|w| w == magic)?;
    let word = |off: usize| u32::from_le_bytes(elf[at + off..at + off + 4].try_into().unwrap());
    let start = at + 24 + word(8) as usize;
    Some(start..start + word(12) as usize)
}

/// xorshift64*: deterministic, so a failure names a mutant that can be made again.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// `elf` with one or two words of `types` changed.
fn mutate(elf: &[u8], types: &std::ops::Range<usize>, rng: &mut Rng) -> Vec<u8> {
    let mut out = elf.to_vec();
    let words = types.len() / 4;
    for _ in 0..1 + rng.below(2) {
        let at = types.start + 4 * rng.below(words);
        let old = u32::from_le_bytes(out[at..at + 4].try_into().unwrap());
        let value = match rng.below(5) {
            // A small number: an id, a size, a count, an offset.
            0 => rng.below(40) as u32,
            // Another kind, keeping the count.
            1 => (rng.below(20) as u32) << 24 | (old & 0xffff),
            // The kind flag.
            2 => old ^ 0x8000_0000,
            // One bit.
            3 => old ^ (1 << rng.below(32)),
            _ => rng.next() as u32,
        };
        out[at..at + 4].copy_from_slice(&value.to_le_bytes());
    }
    out
}

/// What libbpf does with `elf`; `None` when a mutant changed a map's type, sizes or flags
/// (BTF-defined maps take them from BTF): map creation has tests of its own, and a mutated
/// size could ask the kernel for gigabytes.
fn libbpf_outcome(name: &str, elf: &[u8], maps: &[MapInfo]) -> Option<Outcome> {
    let Ok(mut obj) = LibbpfObject::open_bytes(name, elf) else {
        return Some(Outcome::Refused);
    };
    if obj.maps() != maps {
        return None;
    }
    for p in obj.programs() {
        if obj.set_autoload(&p.name, false).is_err() {
            return Some(Outcome::Refused);
        }
    }
    Some(match obj.load(&LogOptions::default()).result {
        Err(_) => Outcome::Refused,
        Ok(()) if obj.btf_in_kernel() => Outcome::WithBtf,
        Ok(()) => Outcome::WithoutBtf,
    })
}

/// The maps libbpf makes of an object as it is, when it loads it with its BTF.
fn original_maps(name: &str, elf: &[u8]) -> Option<Vec<MapInfo>> {
    let maps = LibbpfObject::open_bytes(name, elf).ok()?.maps();
    (libbpf_outcome(name, elf, &maps)? == Outcome::WithBtf).then_some(maps)
}

fn bpfemu_outcome(name: &str, elf: &[u8]) -> (Outcome, String) {
    let options = LoadOptions {
        kernel: bpfemu_loader::Kernel::with_btf_file("/sys/kernel/btf/vmlinux"),
        ..LoadOptions::default()
    };
    match bpfemu_loader::load_bytes(name, elf, &options) {
        Err(e) => (Outcome::Refused, e.to_string()),
        Ok(obj) => match obj.btf.as_ref().map(|b| b.kernel_refusal()) {
            None => (Outcome::WithoutBtf, "no BTF".into()),
            Some(Some(why)) => (Outcome::WithoutBtf, why),
            // What the kernel says of the blob bpfemu would send, for the failure message.
            Some(None) => {
                let sent = obj.btf.as_ref().map(|b| b.to_kernel_bytes().bytes);
                let kernel = match sent.map(|b| bpfemu_kernel::btf_load(&b)) {
                    Some(Err((errno, log))) => format!(
                        "the kernel refuses bpfemu's blob: errno {errno}: {}",
                        log.lines().last().unwrap_or_default()
                    ),
                    _ => String::new(),
                };
                (Outcome::WithBtf, kernel)
            }
        },
    }
}

#[test]
fn btf_mutants_load_as_libbpf_loads_them() {
    if !kernel_or_skip("btf_mutants_load_as_libbpf_loads_them") {
        return;
    }
    let mut differences = Vec::new();
    let mut judged = 0;
    for path in objects() {
        let elf = std::fs::read(&path).expect("object");
        let Some(types) = btf_types(&elf).filter(|t| t.len() >= 4) else {
            continue;
        };
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        // Objects libbpf does not load as they are have their own tests.
        let Some(maps) = original_maps(&name, &elf) else {
            continue;
        };
        let (original, why) = bpfemu_outcome(&name, &elf);
        assert_eq!(original, Outcome::WithBtf, "{name} as it is: {why}");
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ elf.len() as u64);
        for n in 0..MUTANTS {
            let mutant = mutate(&elf, &types, &mut rng);
            let Some(libbpf) = libbpf_outcome(&name, &mutant, &maps) else {
                continue;
            };
            let (bpfemu, why) = bpfemu_outcome(&name, &mutant);
            // libbpf relocates only the programs it loads (none here).
            if why.contains("CO-RE relocation failed") {
                continue;
            }
            judged += 1;
            if libbpf == bpfemu {
                continue;
            }
            differences.push(format!(
                "{name} mutant {n}: libbpf {libbpf:?}, bpfemu {bpfemu:?} ({why})"
            ));
        }
    }
    eprintln!(
        "btf_mutants: {judged} mutants judged, {} differ",
        differences.len()
    );
    assert!(judged >= 2000, "only {judged} mutants");
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// Every object file under `dir`, at any depth.
fn objects_under(dir: &Path, found: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if path.is_dir() {
            objects_under(&path, found);
        } else if path.extension().is_some_and(|x| x == "o") {
            found.push(path);
        }
    }
}

/// The objects of the repository as they are (no mutation): where libbpf loads one, bpfemu
/// reaches the same outcome, so the model refuses no BTF the kernel takes.
#[test]
fn the_repositorys_objects_load_as_libbpf_loads_them() {
    if !kernel_or_skip("the_repositorys_objects_load_as_libbpf_loads_them") {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    objects_under(&root.join("tests/data"), &mut found);
    objects_under(&root.join("examples/xdp/build"), &mut found);
    found.sort();
    let mut differences = Vec::new();
    let mut judged = 0;
    for path in found {
        let elf = std::fs::read(&path).expect("object");
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Ok(opened) = LibbpfObject::open_bytes(&name, &elf) else {
            continue;
        };
        let maps = opened.maps();
        drop(opened);
        // Maps of more than 64 MiB are not created here (the tests of their objects size
        // them down).
        let bytes = |m: &MapInfo| u64::from(m.max_entries) * u64::from(m.key_size + m.value_size);
        if maps.iter().map(bytes).sum::<u64>() > 64 << 20 {
            continue;
        }
        let Some(libbpf) = libbpf_outcome(&name, &elf, &maps) else {
            continue;
        };
        if libbpf == Outcome::Refused {
            continue;
        }
        judged += 1;
        let (bpfemu, why) = bpfemu_outcome(&name, &elf);
        // Refusals of a program (libbpf makes them when it loads that program, which this
        // test does not) have the loader's tests.
        if bpfemu == Outcome::Refused && !why.contains("BTF") {
            continue;
        }
        if bpfemu != libbpf {
            differences.push(format!(
                "{}: libbpf {libbpf:?}, bpfemu {bpfemu:?} ({why})",
                path.display()
            ));
        }
    }
    eprintln!(
        "repository objects: {judged} judged, {} differ",
        differences.len()
    );
    assert!(judged >= 100, "only {judged} objects");
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

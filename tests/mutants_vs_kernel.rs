//! Single-byte mutants of the example corpus, judged by the running kernel and by bpfemu:
//! one byte of one program section (instructions) or map section (legacy `maps`, `.maps`,
//! global data) flipped, the ELF otherwise intact, then every program loaded in the kernel
//! (`diff --verifier`'s path) and verified by bpfemu. The verdicts and error lines must agree
//! (a mutant bpfemu accepts and the kernel refuses, a false green, is reported apart); a
//! mutant bpfemu cannot judge yet ("undecided") is counted, not failed.
//!
//! `BPFEMU_MUTANTS=N` sets how many mutants (default 300, a few seconds); `BPFEMU_MUTANT_SEED`
//! picks another set. Mutants whose object bpfemu cannot load (a relocation broken by the
//! flip) are not judged: libbpf would not load them either. Skipped when bpf() is out of
//! reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

#[allow(dead_code)]
mod cli_support;

use bpfemu::vm::rng::Rng;
use std::path::{Path, PathBuf};

/// A section a mutant may flip a byte of: where its bytes sit in the file.
struct Section {
    name: String,
    offset: usize,
    size: usize,
}

fn u16_at(data: &[u8], at: usize) -> usize {
    u16::from_le_bytes([data[at], data[at + 1]]) as usize
}

fn u32_at(data: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(data[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(data: &[u8], at: usize) -> usize {
    u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes")) as usize
}

/// The program and map sections of a little-endian ELF64 object (clang's BPF output).
fn mutable_sections(elf: &[u8]) -> Vec<Section> {
    const SHF_EXECINSTR: usize = 0x4;
    const SHT_PROGBITS: u32 = 1;
    let (shoff, shentsize, shnum, shstrndx) = (
        u64_at(elf, 0x28),
        u16_at(elf, 0x3a),
        u16_at(elf, 0x3c),
        u16_at(elf, 0x3e),
    );
    let header = |i: usize| shoff + i * shentsize;
    let names = u64_at(elf, header(shstrndx) + 0x18);
    (0..shnum)
        .filter_map(|i| {
            let h = header(i);
            let name_at = names + u32_at(elf, h) as usize;
            let end = elf[name_at..].iter().position(|&b| b == 0)? + name_at;
            let name = String::from_utf8_lossy(&elf[name_at..end]).into_owned();
            let flags = u64_at(elf, h + 8);
            let is_map_section = name == "maps"
                || name == ".maps"
                || name.starts_with(".data")
                || name.starts_with(".rodata");
            let wanted = u32_at(elf, h + 4) == SHT_PROGBITS
                && (flags & SHF_EXECINSTR != 0 || is_map_section);
            let size = u64_at(elf, h + 0x20);
            (wanted && size > 0).then(|| Section {
                name,
                offset: u64_at(elf, h + 0x18),
                size,
            })
        })
        .collect()
}

fn corpus() -> Vec<PathBuf> {
    let dir = cli_support::root().join("examples/xdp/build");
    let mut objects: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/xdp/build")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "o"))
        .collect();
    objects.sort();
    objects
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Default)]
struct Tally {
    mutants: usize,
    not_loaded: usize,
    too_large: usize,
    programs: usize,
    agree: usize,
    rejected_by_kernel: usize,
    undecided: usize,
    false_accepts: Vec<String>,
    other: Vec<String>,
}

/// The most kernel memory a mutant's maps may ask for. A flipped byte in a legacy map
/// definition can ask a preallocated per-CPU hash for billions of entries, which the kernel
/// then spends minutes allocating (and gigabytes of the test machine's memory) before it
/// fails: such mutants are left out, not judged.
const MAX_MAP_BYTES: u64 = 64 << 20;

/// A generous estimate of what the kernel allocates for the object's maps.
fn kernel_map_bytes(object: &bpfemu::loader::Object) -> u64 {
    const CPUS: u64 = 64;
    const ELEMENT_OVERHEAD: u64 = 64;
    let per_cpu = |t: u32| {
        use bpfemu::isa::uapi::*;
        matches!(
            t,
            BPF_MAP_TYPE_PERCPU_HASH | BPF_MAP_TYPE_PERCPU_ARRAY | BPF_MAP_TYPE_LRU_PERCPU_HASH
        )
    };
    let map_bytes = |m: &bpfemu::loader::MapSpec| {
        let value = u64::from(m.value_size) * if per_cpu(m.map_type) { CPUS } else { 1 };
        u64::from(m.max_entries) * (u64::from(m.key_size) + value + ELEMENT_OVERHEAD)
    };
    object
        .maps
        .iter()
        .map(|m| map_bytes(m) + m.inner.as_deref().map_or(0, map_bytes))
        .fold(0u64, u64::saturating_add)
}

fn judge(mutant: &Path, what: &str, tally: &mut Tally) {
    let load = bpfemu::load_args::LoadArgs::default().options();
    match bpfemu::loader::load_file(mutant, &load) {
        Ok(object) if kernel_map_bytes(&object) <= MAX_MAP_BYTES => {}
        Ok(_) => {
            tally.too_large += 1;
            return;
        }
        Err(_) => {
            tally.not_loaded += 1;
            return;
        }
    }
    let Ok(verdicts) = bpfemu::diff::verify_in_kernel(mutant, &load) else {
        tally.not_loaded += 1;
        return;
    };
    for v in verdicts.iter().filter(|v| v.bpfemu.verified) {
        tally.programs += 1;
        tally.rejected_by_kernel += usize::from(!v.kernel.accepted);
        let ours = v.bpfemu.error.as_deref().unwrap_or("accepted");
        let theirs = v.kernel.error.as_deref().unwrap_or("accepted");
        let line = format!("{what} {}: kernel `{theirs}`, bpfemu `{ours}`", v.program);
        if v.agree {
            tally.agree += 1;
        } else if ours.starts_with("not yet supported") {
            tally.undecided += 1;
        } else if v.bpfemu.accepted && !v.kernel.accepted {
            tally.false_accepts.push(line);
        } else {
            tally.other.push(line);
        }
    }
}

#[test]
fn single_byte_mutants_agree_with_the_kernel() {
    if !cli_support::kernel_or_skip("single_byte_mutants_agree_with_the_kernel") {
        return;
    }
    let wanted = env_number("BPFEMU_MUTANTS", 300) as usize;
    let mut rng = Rng::new(env_number("BPFEMU_MUTANT_SEED", 1));
    let scratch = cli_support::Scratch::new("mutants");
    let objects: Vec<(PathBuf, Vec<u8>)> = corpus()
        .into_iter()
        .map(|p| {
            let data = std::fs::read(&p).expect("object");
            (p, data)
        })
        .collect();
    let mut tally = Tally::default();
    while tally.mutants < wanted {
        let (path, original) = rng.pick(&objects);
        let sections = mutable_sections(original);
        let section = rng.pick(&sections);
        let at = section.offset + rng.below(section.size as u64) as usize;
        let flip = 1 + rng.below(255) as u8;
        let mut mutant = original.clone();
        mutant[at] ^= flip;
        let file = scratch.path(&format!("m{}.o", tally.mutants));
        std::fs::write(&file, &mutant).expect("write mutant");
        let what = format!(
            "{} {}+{:#x} ^{flip:#04x}",
            path.file_name().expect("name").to_string_lossy(),
            section.name,
            at - section.offset
        );
        judge(Path::new(&file), &what, &mut tally);
        std::fs::remove_file(&file).expect("remove mutant");
        tally.mutants += 1;
    }
    eprintln!(
        "{} mutants, {} not loadable, {} with maps too large to create; {} programs judged ({} rejected by the kernel): {} agree, \
         {} undecided, {} false accepts, {} other differences",
        tally.mutants,
        tally.not_loaded,
        tally.too_large,
        tally.programs,
        tally.rejected_by_kernel,
        tally.agree,
        tally.undecided,
        tally.false_accepts.len(),
        tally.other.len()
    );
    for line in &tally.other {
        eprintln!("differs: {line}");
    }
    assert!(
        tally.false_accepts.is_empty(),
        "bpfemu accepts what the kernel refuses:\n{}",
        tally.false_accepts.join("\n")
    );
    assert!(
        tally.other.is_empty(),
        "bpfemu and the kernel differ:\n{}",
        tally.other.join("\n")
    );
    assert!(tally.programs > wanted / 2, "too few mutants judged");
}

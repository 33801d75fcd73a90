//! bpfemu's loader against libbpf 1.7: for every object of the XDP corpus, the programs (order,
//! names, sections, types, and the final instruction streams libbpf hands to `BPF_PROG_LOAD`)
//! and the map specs must be the same.
//!
//! libbpf's streams come from `bpf_object__prepare` (see `bpfemu_conformance::libbpf`), with map
//! fds rewritten to map indices. bpfemu's `Object` holds map indices in its own map order, so
//! its indices are translated to libbpf's through the map names before comparing; a different
//! map order is reported on its own.

use bpfemu_conformance::libbpf::{self, LibbpfObject, MapInfo, PSEUDO_MAP_FD, PSEUDO_MAP_VALUE};
use bpfemu_isa::disasm::insn_text;
use bpfemu_isa::{Insn, RawInsn};
use bpfemu_loader::{LoadOptions, Object};
use std::path::{Path, PathBuf};

const LD_IMM64: u8 = 0x18;

fn corpus() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/xdp/build");
    let dir = dir.canonicalize().unwrap_or(dir);
    let mut objects: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "o"))
        // libbpf 1.x refuses legacy `maps` sections (checked in corpus_kernel_accepts.rs), so
        // there is no libbpf answer to compare with.
        .filter(|p| !p.to_string_lossy().contains("legacy_maps."))
        .collect();
    objects.sort();
    assert!(!objects.is_empty(), "no objects in {}", dir.display());
    objects
}

/// Counts for the summary line.
#[derive(Default)]
struct Tally {
    objects: usize,
    programs: usize,
    programs_matching: usize,
    maps: usize,
    maps_matching: usize,
}

#[test]
fn loader_matches_libbpf_on_the_corpus() {
    if !libbpf::kernel_or_skip("loader_matches_libbpf") {
        return;
    }
    let mut tally = Tally::default();
    let mut report = Vec::new();
    for path in corpus() {
        compare_object(&path, &mut tally, &mut report);
    }
    eprintln!(
        "{} objects: {}/{} programs and {}/{} maps equal libbpf's",
        tally.objects, tally.programs_matching, tally.programs, tally.maps_matching, tally.maps
    );
    assert!(
        report.is_empty(),
        "{} differences:\n\n{}",
        report.len(),
        report.join("\n\n")
    );
}

fn compare_object(path: &Path, tally: &mut Tally, report: &mut Vec<String>) {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    tally.objects += 1;
    let mut oracle = LibbpfObject::open_file(path).expect("libbpf opens the corpus object");
    let prepared = oracle.prepare().expect("libbpf prepares the corpus object");
    let maps = oracle.maps();
    tally.programs += prepared.len();
    tally.maps += maps.len();
    let ours = match bpfemu_loader::load_file(path, &LoadOptions::default()) {
        Ok(object) => object,
        Err(e) => {
            report.push(format!("== {name}: bpfemu-loader failed: {e}"));
            return;
        }
    };
    tally.maps_matching += compare_maps(&name, &maps, &ours, report);
    let remap = index_remap(&maps, &ours);
    if prepared.len() != ours.programs.len() {
        report.push(format!(
            "== {name}: libbpf has {} programs {:?}, bpfemu {} {:?}",
            prepared.len(),
            prepared.iter().map(|p| &p.name).collect::<Vec<_>>(),
            ours.programs.len(),
            ours.programs.iter().map(|p| &p.name).collect::<Vec<_>>()
        ));
    }
    for (theirs, mine) in prepared.iter().zip(&ours.programs) {
        let head = format!(
            "== {name} / program {} (section {})",
            theirs.name, theirs.section
        );
        let mut diffs = Vec::new();
        let attrs = [
            ("name", theirs.name.clone(), mine.name.clone()),
            ("section", theirs.section.clone(), mine.section.clone()),
            (
                "prog_type",
                theirs.prog_type.to_string(),
                mine.prog_type.to_string(),
            ),
            (
                "expected_attach_type",
                theirs.expected_attach_type.to_string(),
                mine.expected_attach_type.unwrap_or(0).to_string(),
            ),
        ];
        for (what, a, b) in attrs {
            if a != b {
                diffs.push(format!("{what}: libbpf {a:?}, bpfemu {b:?}"));
            }
        }
        let mine_insns = remap_map_refs(&mine.insns, &remap);
        if let Some(text) = stream_diff(&theirs.insns, &mine_insns, &maps) {
            diffs.push(text);
        }
        if diffs.is_empty() {
            tally.programs_matching += 1;
        } else {
            report.push(format!("{head}\n{}", diffs.join("\n")));
        }
    }
}

/// Compares map specs in order; returns how many are equal and reports the rest.
fn compare_maps(name: &str, theirs: &[MapInfo], ours: &Object, report: &mut Vec<String>) -> usize {
    let their_names: Vec<&str> = theirs.iter().map(|m| m.name.as_str()).collect();
    let our_names: Vec<&str> = ours.maps.iter().map(|m| m.name.as_str()).collect();
    if their_names != our_names {
        report.push(format!(
            "== {name}: map order differs: libbpf {their_names:?}, bpfemu {our_names:?}"
        ));
    }
    let mut equal = 0;
    for t in theirs {
        let Some(o) = ours.maps.iter().find(|m| m.name == t.name) else {
            report.push(format!("== {name} / map {}: missing in bpfemu", t.name));
            continue;
        };
        let fields = [
            ("map_type", t.map_type, o.map_type),
            ("key_size", t.key_size, o.key_size),
            ("value_size", t.value_size, o.value_size),
            ("max_entries", t.max_entries, o.max_entries),
            ("map_flags", t.map_flags, o.map_flags),
            ("numa_node", t.numa_node, o.numa_node),
        ];
        let diffs: Vec<String> = fields
            .iter()
            .filter(|(_, a, b)| a != b)
            .map(|(what, a, b)| format!("{what}: libbpf {a:#x}, bpfemu {b:#x}"))
            .collect();
        if diffs.is_empty() {
            equal += 1;
        } else {
            report.push(format!("== {name} / map {}: {}", t.name, diffs.join(", ")));
        }
    }
    equal
}

/// For each of bpfemu's map indices, libbpf's index of the map with the same name (or an
/// out-of-range index that can never compare equal when libbpf has no such map).
fn index_remap(theirs: &[MapInfo], ours: &Object) -> Vec<i32> {
    ours.maps
        .iter()
        .enumerate()
        .map(|(i, m)| {
            theirs
                .iter()
                .position(|t| t.name == m.name)
                .map_or(10_000 + i as i32, |p| p as i32)
        })
        .collect()
}

fn remap_map_refs(insns: &[RawInsn], remap: &[i32]) -> Vec<RawInsn> {
    let mut out = insns.to_vec();
    let mut pc = 0;
    while pc < out.len() {
        let insn = &mut out[pc];
        if insn.code != LD_IMM64 {
            pc += 1;
            continue;
        }
        if insn.src == PSEUDO_MAP_FD || insn.src == PSEUDO_MAP_VALUE {
            insn.imm = usize::try_from(insn.imm)
                .ok()
                .and_then(|i| remap.get(i).copied())
                .unwrap_or(-1);
        }
        pc += 2;
    }
    out
}

/// `None` when the streams are equal; otherwise where they first differ, both sides
/// disassembled around that point.
fn stream_diff(theirs: &[RawInsn], ours: &[RawInsn], maps: &[MapInfo]) -> Option<String> {
    let first = theirs.iter().zip(ours).position(|(a, b)| a != b);
    let first = match first {
        Some(i) => i,
        None if theirs.len() == ours.len() => return None,
        None => theirs.len().min(ours.len()),
    };
    let mut text = format!(
        "instruction streams differ at insn {first} (libbpf {} slots, bpfemu {} slots); maps: {}\n",
        theirs.len(),
        ours.len(),
        maps.iter()
            .enumerate()
            .map(|(i, m)| format!("{i}={}", m.name))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let from = first.saturating_sub(3);
    let to = first + 6;
    text.push_str(&format!("  {:<6}| {:<44}| bpfemu\n", "insn", "libbpf"));
    for pc in from..to.min(theirs.len().max(ours.len())) {
        let mark = if pc == first { '>' } else { ' ' };
        text.push_str(&format!(
            "{mark} {pc:<6}| {:<44}| {}\n",
            slot_text(theirs, pc),
            slot_text(ours, pc)
        ));
    }
    Some(text)
}

/// One slot as the kernel's disassembler would print it, with its raw fields so that
/// differences the text hides (like a map index) still show.
fn slot_text(insns: &[RawInsn], pc: usize) -> String {
    let Some(raw) = insns.get(pc) else {
        return "(end)".into();
    };
    let fields = format!(
        "[{:02x} {}/{} {} {}]",
        raw.code, raw.dst, raw.src, raw.off, raw.imm
    );
    if pc > 0 && insns[pc - 1].code == LD_IMM64 && is_second_slot(insns, pc) {
        return format!("(2nd slot) {fields}");
    }
    match Insn::decode(insns, pc) {
        Ok((insn, _)) => format!("{} {fields}", insn_text(&insn)),
        Err(e) => format!("<{e}> {fields}"),
    }
}

/// Whether `pc` is the second slot of an `ld_imm64` (found by walking from the start).
fn is_second_slot(insns: &[RawInsn], pc: usize) -> bool {
    let mut i = 0;
    while i < pc {
        i += if insns[i].code == LD_IMM64 { 2 } else { 1 };
    }
    i > pc
}

/// `__arena` globals: libbpf places them in the arena map at the offset its kernel probe
/// chooses, and every reference becomes a map value load of the arena at the variable's
/// offset; bpfemu's streams and maps must be libbpf's.
#[test]
fn arena_globals_are_placed_as_libbpf_places_them() {
    if !libbpf::kernel_or_skip("arena_globals_are_placed_as_libbpf_places_them") {
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/verifier/arena_globals.o");
    let mut tally = Tally::default();
    let mut report = Vec::new();
    compare_object(&path, &mut tally, &mut report);
    assert!(tally.programs > 0, "libbpf prepared no program");
    assert!(report.is_empty(), "{}", report.join("\n\n"));
}

/// `__arena` globals libbpf refuses to open (two arena maps; none): bpfemu's loader refuses
/// the same objects, with libbpf's words.
#[test]
fn arena_globals_libbpf_refuses_are_refused() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/load");
    for (name, words) in [
        (
            "arena_two_arenas.o",
            "only single ARENA map is supported (map 'first' is also ARENA)",
        ),
        (
            "arena_without_map.o",
            "to use global __arena variables the ARENA map should be explicitly declared",
        ),
    ] {
        let path = dir.join(name);
        let theirs = match LibbpfObject::open_file(&path) {
            Ok(_) => panic!("libbpf opened {name}"),
            Err(e) => e.to_string(),
        };
        assert!(theirs.contains(words), "libbpf on {name}: {theirs}");
        let ours = bpfemu_loader::load_file(&path, &LoadOptions::default())
            .map(|_| ())
            .expect_err("bpfemu's loader refuses it")
            .to_string();
        assert!(ours.contains(words), "bpfemu on {name}: {ours}");
    }
}

//! The object's BTF as libbpf 1.7 passes it to 6.18. `.BTF`: a blob `BPF_BTF_LOAD` refuses,
//! after which libbpf loads the maps and programs without BTF (a spin lock then needs BTF the
//! map no longer has, a callback needs func_info). `.BTF.ext`: func_info and line_info records
//! the kernel refuses at `BPF_PROG_LOAD` (`check_btf_func`, `check_btf_line`), and a
//! `.BTF.ext` libbpf cannot parse, which it drops. Each mutant of a corpus object is judged by
//! libbpf itself and by `bpfemu verify`; the verdicts and messages must be the same.
//!
//! `BPFEMU_BTF_MUTANTS=N` sets how many single-byte mutants of each section the sweeps judge
//! (default 60); `BPFEMU_MUTANT_SEED` picks another set.

#[allow(dead_code)]
mod cli_support;

use bpfemu::vm::rng::Rng;
use bpfemu_conformance::libbpf::{Level, LibbpfObject, LogOptions};
use cli_support::{Scratch, bpfemu, example, kernel_or_skip, stdout};

fn u32_at(data: &[u8], at: usize) -> usize {
    u32::from_le_bytes(data[at..at + 4].try_into().expect("4 bytes")) as usize
}

fn u64_at(data: &[u8], at: usize) -> usize {
    u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes")) as usize
}

/// Where the section `wanted` of a little-endian ELF64 object lies: (offset, size).
fn section(elf: &[u8], wanted: &str) -> Option<(usize, usize)> {
    let (shoff, shentsize, shnum, shstrndx) = (
        u64_at(elf, 0x28),
        u32_at(elf, 0x3a) & 0xffff,
        u32_at(elf, 0x3c) & 0xffff,
        u32_at(elf, 0x3e) & 0xffff,
    );
    let header = |i: usize| shoff + i * shentsize;
    let names = u64_at(elf, header(shstrndx) + 0x18);
    (0..shnum).find_map(|i| {
        let h = header(i);
        let at = names + u32_at(elf, h);
        let end = at + elf[at..].iter().position(|&b| b == 0)?;
        (&elf[at..end] == wanted.as_bytes()).then(|| (u64_at(elf, h + 0x18), u64_at(elf, h + 0x20)))
    })
}

/// Where the `n`th line_info record of the first ELF section starts in the file.
fn line_record(elf: &[u8], n: usize) -> usize {
    let (ext, _) = section(elf, ".BTF.ext").expect(".BTF.ext");
    let hdr_len = u32_at(elf, ext + 4);
    let line_off = u32_at(elf, ext + 16);
    let subsection = ext + hdr_len + line_off;
    let rec_size = u32_at(elf, subsection);
    subsection + 4 + 8 + n * rec_size
}

/// The kernel's verdict through libbpf: `None` when accepted, else the log's error line (or
/// libbpf's last warning when the kernel logged nothing).
fn libbpf_verdict(path: &str, program: &str) -> Result<Option<String>, String> {
    let mut obj = LibbpfObject::open_file(std::path::Path::new(path)).map_err(|e| e.to_string())?;
    for other in obj.programs().into_iter().filter(|p| p.name != program) {
        obj.set_autoload(&other.name, false)
            .map_err(|e| e.to_string())?;
    }
    let out = obj.load(&LogOptions::default());
    match out.programs.iter().find(|p| p.name == program) {
        Some(prog) if prog.loaded => Ok(None),
        Some(prog) if !prog.log.trim().is_empty() => {
            Ok(Some(bpfemu::kernel::verifier_error_line(&prog.log)))
        }
        // Refused before the kernel logged anything: libbpf's last word.
        // Refused before the kernel logged anything (a map the kernel refuses): libbpf's last
        // warning, which bpfemu gives as its message.
        _ => {
            let warning = out.messages.iter().rev().find(|m| m.level == Level::Warn);
            let text = warning.map_or("load failed", |m| m.text.trim());
            Ok(Some(text.trim_start_matches("libbpf: ").to_owned()))
        }
    }
}

/// bpfemu's verdict on the only program of `path`: `None` when accepted, else its message.
fn bpfemu_verdict(path: &str) -> Result<Option<String>, String> {
    let out = bpfemu(&["verify", path, "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Bad BTF is bad input, never a crash.
    assert!(
        out.status.code().is_some_and(|c| c <= 2) && !stderr.contains("panicked"),
        "{path}: {stderr}"
    );
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).map_err(|e| e.to_string())?;
    if let Some(refused) = doc["not_loaded"].as_array().and_then(|a| a.first()) {
        return Err(refused.to_string());
    }
    let program = &doc["programs"][0];
    Ok(program["message"].as_str().map(str::to_owned))
}

/// `original` (an example object) edited, written as `name` into `scratch`.
fn mutant(scratch: &Scratch, name: &str, original: &str, edit: impl FnOnce(&mut [u8])) -> String {
    let mut data = std::fs::read(example(original)).expect("object");
    edit(&mut data);
    let path = scratch.path(name);
    std::fs::write(&path, &data).expect("write mutant");
    path
}

#[test]
fn a_line_info_string_outside_the_strings_is_refused_as_the_kernel_refuses_it() {
    let scratch = Scratch::new("btf_ext_line_off");
    let path = mutant(
        &scratch,
        "bad_line_off.o",
        "xdp/build/adjust_meta.v3.o",
        |elf| {
            let at = line_record(elf, 1) + 8;
            elf[at..at + 4].copy_from_slice(&0x00ff_ffffu32.to_le_bytes());
        },
    );
    let ours = bpfemu_verdict(&path).expect("bpfemu judges it");
    assert_eq!(
        ours.as_deref(),
        Some("Invalid line_info[1].line_off or .file_name_off")
    );
    if kernel_or_skip("a_line_info_string_outside_the_strings_is_refused_as_the_kernel_refuses_it")
    {
        assert_eq!(libbpf_verdict(&path, "xdp_set_meta").expect("libbpf"), ours);
    }
}

#[test]
fn line_info_out_of_order_is_refused_as_the_kernel_refuses_it() {
    let scratch = Scratch::new("btf_ext_unsorted");
    let path = mutant(
        &scratch,
        "unsorted_lines.o",
        "xdp/build/adjust_meta.v3.o",
        |elf| {
            let first = line_record(elf, 0);
            let second = line_record(elf, 1);
            // The second record's instruction becomes the first one's: not strictly increasing.
            let insn = elf[first..first + 4].to_vec();
            elf[second..second + 4].copy_from_slice(&insn);
        },
    );
    let ours = bpfemu_verdict(&path).expect("bpfemu judges it");
    assert!(
        ours.as_deref()
            .is_some_and(|m| m.starts_with("Invalid line_info[1].insn_off:0 ")),
        "{ours:?}"
    );
    if kernel_or_skip("line_info_out_of_order_is_refused_as_the_kernel_refuses_it") {
        assert_eq!(libbpf_verdict(&path, "xdp_set_meta").expect("libbpf"), ours);
    }
}

#[test]
fn a_btf_ext_libbpf_cannot_parse_is_dropped_when_nothing_needs_btf() {
    // The line_info subsection's length runs past the blob: libbpf ignores .BTF.ext and the
    // program loads without func_info and line_info.
    let scratch = Scratch::new("btf_ext_header");
    let path = mutant(&scratch, "bad_ext_header.o", "xdp/build/pass.v3.o", |elf| {
        let (ext, _) = section(elf, ".BTF.ext").expect(".BTF.ext");
        elf[ext + 20..ext + 24].copy_from_slice(&0x0010_0000u32.to_le_bytes());
    });
    let ours = bpfemu_verdict(&path).expect("bpfemu judges it");
    assert_eq!(ours, None);
    if kernel_or_skip("a_btf_ext_libbpf_cannot_parse_is_dropped_when_nothing_needs_btf") {
        assert_eq!(libbpf_verdict(&path, "xdp_pass").expect("libbpf"), None);
    }
}

/// `original` with one of its BTF names made an invalid identifier (`ingress_ifindex`, a
/// member of `struct xdp_md`, becomes `ingress=ifindex`): libbpf opens it, the kernel refuses
/// the BTF ("Invalid name"), and libbpf loads everything without BTF.
fn with_invalid_name(elf: &mut [u8]) {
    let (off, size) = section(elf, ".BTF").expect(".BTF");
    let blob = &elf[off..off + size];
    let needle = b"\0ingress_ifindex\0";
    let at = blob
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the BTF names ingress_ifindex");
    elf[off + at + 8] = b'=';
}

#[test]
fn a_spin_lock_map_loses_its_btf_with_the_object_btf() {
    let scratch = Scratch::new("btf_spin_lock");
    let path = mutant(
        &scratch,
        "bad_name.o",
        "xdp/build/spin_lock.v3.o",
        with_invalid_name,
    );
    let ours = bpfemu_verdict(&path).expect("bpfemu judges it");
    assert_eq!(
        ours.as_deref(),
        Some("map 'buckets' has to have BTF in order to use bpf_spin_lock")
    );
    if kernel_or_skip("a_spin_lock_map_loses_its_btf_with_the_object_btf") {
        assert_eq!(
            libbpf_verdict(&path, "xdp_ratelimit").expect("libbpf"),
            ours
        );
    }
}

#[test]
fn a_callback_needs_the_func_info_a_refused_btf_takes_away() {
    let scratch = Scratch::new("btf_callback");
    let path = mutant(
        &scratch,
        "bad_name.o",
        "xdp/build/bpf_loop.v3.o",
        with_invalid_name,
    );
    let ours = bpfemu_verdict(&path).expect("bpfemu judges it");
    assert_eq!(ours.as_deref(), Some("missing btf func_info"));
    // The rejection says why the program had no func_info.
    let text = stdout(&bpfemu(&["verify", &path]));
    assert!(
        text.contains("note: BPF_BTF_LOAD refuses the object's BTF (type [")
            && text.contains("Invalid name"),
        "{text}"
    );
    if kernel_or_skip("a_callback_needs_the_func_info_a_refused_btf_takes_away") {
        assert_eq!(
            libbpf_verdict(&path, "xdp_ipv6_exthdr").expect("libbpf"),
            ours
        );
    }
}

#[test]
fn a_global_function_argument_without_a_size_drops_the_btf() {
    // Found by the .BTF sweep: `port_class`'s prototype gets its argument typed as a FUNC
    // (type 16, __u16, becomes 21, the FUNC port_class). The kernel refuses the BTF ("Invalid
    // arg#1"), so libbpf loads without func_info and the global function is verified as a
    // static one, which the caller's arguments fit.
    let scratch = Scratch::new("btf_func_arg");
    let path = mutant(&scratch, "func_arg.o", "xdp/build/subprogs.v3.o", |elf| {
        let (off, _) = section(elf, ".BTF").expect(".BTF");
        assert_eq!(
            elf[off + 0x178],
            16,
            "subprogs.v3.o was rebuilt: find port's type again"
        );
        elf[off + 0x178] = 21;
    });
    assert_eq!(bpfemu_verdict(&path).expect("bpfemu judges it"), None);
    if kernel_or_skip("a_global_function_argument_without_a_size_drops_the_btf") {
        assert_eq!(libbpf_verdict(&path, "xdp_subprogs").expect("libbpf"), None);
    }
}

#[test]
fn a_btf_libbpf_cannot_parse_is_dropped_when_nothing_needs_btf() {
    // The string section no longer ends with a NUL: libbpf cannot parse .BTF, and with no
    // BTF-defined map nor extern it loads the program without it.
    let scratch = Scratch::new("btf_unparsed");
    let path = mutant(&scratch, "bad_strings.o", "xdp/build/pass.v3.o", |elf| {
        let (off, size) = section(elf, ".BTF").expect(".BTF");
        elf[off + size - 1] = b'x';
    });
    assert_eq!(bpfemu_verdict(&path).expect("bpfemu judges it"), None);
    if kernel_or_skip("a_btf_libbpf_cannot_parse_is_dropped_when_nothing_needs_btf") {
        assert_eq!(libbpf_verdict(&path, "xdp_pass").expect("libbpf"), None);
    }
}

/// Whether the mutant's maps ask the kernel for more memory than a test should spend: a flip
/// in a BTF-defined map's `max_entries` (an array length in BTF) can ask for billions of
/// entries, which the kernel answers with ENOMEM or minutes of allocation; memory limits are
/// no BTF rule, so such mutants are not judged (as in `mutants_vs_kernel`).
fn maps_too_large(path: &str) -> bool {
    const MAX_MAP_BYTES: u64 = 64 << 20;
    const CPUS: u64 = 64;
    let load = bpfemu::load_args::LoadArgs::default().options();
    let Ok(object) = bpfemu::loader::load_file(std::path::Path::new(path), &load) else {
        return false;
    };
    let bytes = |m: &bpfemu::loader::MapSpec| {
        let value = u64::from(m.value_size) * CPUS;
        u64::from(m.max_entries) * (u64::from(m.key_size) + value + 64)
    };
    object
        .maps
        .iter()
        .map(bytes)
        .fold(0u64, u64::saturating_add)
        > MAX_MAP_BYTES
}

/// What a sweep of single-byte mutants of one section found.
#[derive(Default)]
struct Sweep {
    judged: usize,
    /// libbpf loads or judges it, bpfemu cannot load the object (its BTF parser is stricter
    /// than libbpf's): counted, not a verdict.
    bpfemu_cannot_load: usize,
    differ: Vec<String>,
}

/// Single-byte mutants of the corpus' `section`: no false accept, and where both judge the
/// program, the same verdict and message.
fn sweep(section_name: &str, seed: u64) -> Sweep {
    let wanted: usize = std::env::var("BPFEMU_BTF_MUTANTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let seed = std::env::var("BPFEMU_MUTANT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(seed);
    let mut rng = Rng::new(seed);
    let objects = [
        "pass",
        "adjust_meta",
        "bpf_loop",
        "ddos_filter",
        "spin_lock",
        "subprogs",
        "trace_printk",
        "xsk_dispatch",
    ];
    let scratch = Scratch::new(&format!("btf_mutants{section_name}"));
    let mut found = Sweep::default();
    for n in 0..wanted {
        let name = rng.pick(&objects);
        let original = format!("xdp/build/{name}.v3.o");
        let flip = 1 + rng.below(255) as u8;
        let pick = rng.below(u64::MAX);
        let mut what = String::new();
        let path = mutant(&scratch, &format!("m{n}.o"), &original, |elf| {
            let (off, size) = section(elf, section_name).expect("section");
            let at = (pick % size as u64) as usize;
            elf[off + at] ^= flip;
            what = format!("{name} {section_name}+{at:#x} ^{flip:#04x}");
        });
        if maps_too_large(&path) {
            continue;
        }
        let program = LibbpfObject::open_file(std::path::Path::new(&path))
            .ok()
            .and_then(|o| o.programs().into_iter().next().map(|p| p.name));
        let ours = bpfemu_verdict(&path);
        let Some(program) = program else {
            // libbpf cannot open it: bpfemu must not judge it either.
            if ours.is_ok() {
                found
                    .differ
                    .push(format!("{what}: libbpf cannot open it, bpfemu judges it"));
            }
            continue;
        };
        let theirs = libbpf_verdict(&path, &program);
        found.judged += 1;
        match (theirs, ours) {
            (Ok(k), Ok(b)) if k == b => {}
            // libbpf refuses the program before the kernel sees it, bpfemu the object (a
            // subprogram without func_info): neither loads it.
            (Ok(Some(k)), Err(_)) if k.starts_with("prog '") => {}
            (Ok(_), Err(_)) => found.bpfemu_cannot_load += 1,
            (k, b) => found
                .differ
                .push(format!("{what}: kernel {k:?}, bpfemu {b:?}")),
        }
    }
    assert!(
        found.judged > wanted / 3,
        "too few mutants judged: {}",
        found.judged
    );
    found
}

#[test]
fn btf_ext_mutants_agree_with_libbpf_and_the_kernel() {
    if !kernel_or_skip("btf_ext_mutants_agree_with_libbpf_and_the_kernel") {
        return;
    }
    let found = sweep(".BTF.ext", 7);
    assert!(found.differ.is_empty(), "{}", found.differ.join("\n"));
    assert_eq!(
        found.bpfemu_cannot_load, 0,
        "bpfemu refuses objects libbpf loads"
    );
}

#[test]
fn btf_mutants_agree_with_libbpf_and_the_kernel() {
    if !kernel_or_skip("btf_mutants_agree_with_libbpf_and_the_kernel") {
        return;
    }
    let found = sweep(".BTF", 5);
    eprintln!(
        "{} .BTF mutants judged; {} that libbpf loads bpfemu cannot load",
        found.judged, found.bpfemu_cannot_load
    );
    assert!(found.differ.is_empty(), "{}", found.differ.join("\n"));
}

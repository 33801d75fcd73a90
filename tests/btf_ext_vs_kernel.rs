//! The object's `.BTF.ext` as libbpf 1.7 passes it to 6.18: func_info and line_info records
//! the kernel refuses at `BPF_PROG_LOAD` (`check_btf_func`, `check_btf_line`), and a
//! `.BTF.ext` libbpf cannot parse, which it drops. Each mutant of a corpus object is judged by
//! libbpf itself and by `bpfemu verify`; the verdicts and messages must be the same.
//!
//! `BPFEMU_BTF_MUTANTS=N` sets how many single-byte `.BTF.ext` mutants the sweep judges
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
        obj.set_autoload(&other.name, false).map_err(|e| e.to_string())?;
    }
    let out = obj.load(&LogOptions::default());
    match out.programs.iter().find(|p| p.name == program) {
        Some(prog) if prog.loaded => Ok(None),
        Some(prog) if !prog.log.trim().is_empty() => {
            Ok(Some(bpfemu::kernel::verifier_error_line(&prog.log)))
        }
        // Refused before the kernel logged anything: libbpf's last word.
        _ => {
            let warning = out.messages.iter().rev().find(|m| m.level == Level::Warn);
            let text = warning.map_or("load failed", |m| m.text.trim());
            Ok(Some(format!("libbpf: {text}")))
        }
    }
}

/// bpfemu's verdict on the only program of `path`: `None` when accepted, else its message.
fn bpfemu_verdict(path: &str) -> Result<Option<String>, String> {
    let out = bpfemu(&["verify", path, "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).map_err(|e| e.to_string())?;
    if let Some(refused) = doc["not_loaded"].as_array().and_then(|a| a.first()) {
        return Err(refused.to_string());
    }
    let program = &doc["programs"][0];
    Ok(program["message"].as_str().map(str::to_owned))
}

/// `original` (an example object) edited, written as `name` into `scratch`.
fn mutant(scratch: &Scratch, name: &str, original: &str, edit: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut data = std::fs::read(example(original)).expect("object");
    edit(&mut data);
    let path = scratch.path(name);
    std::fs::write(&path, &data).expect("write mutant");
    path
}

#[test]
fn a_line_info_string_outside_the_strings_is_refused_as_the_kernel_refuses_it() {
    let scratch = Scratch::new("btf_ext_line_off");
    let path = mutant(&scratch, "bad_line_off.o", "xdp/build/adjust_meta.v3.o", |elf| {
        let at = line_record(elf, 1) + 8;
        elf[at..at + 4].copy_from_slice(&0x00ff_ffffu32.to_le_bytes());
    });
    let ours = bpfemu_verdict(&path).expect("bpfemu judges it");
    assert_eq!(
        ours.as_deref(),
        Some("Invalid line_info[1].line_off or .file_name_off")
    );
    if kernel_or_skip("a_line_info_string_outside_the_strings_is_refused_as_the_kernel_refuses_it") {
        assert_eq!(libbpf_verdict(&path, "xdp_set_meta").expect("libbpf"), ours);
    }
}

#[test]
fn line_info_out_of_order_is_refused_as_the_kernel_refuses_it() {
    let scratch = Scratch::new("btf_ext_unsorted");
    let path = mutant(&scratch, "unsorted_lines.o", "xdp/build/adjust_meta.v3.o", |elf| {
        let first = line_record(elf, 0);
        let second = line_record(elf, 1);
        // The second record's instruction becomes the first one's: not strictly increasing.
        let insn = elf[first..first + 4].to_vec();
        elf[second..second + 4].copy_from_slice(&insn);
    });
    let ours = bpfemu_verdict(&path).expect("bpfemu judges it");
    assert!(
        ours.as_deref().is_some_and(|m| m.starts_with("Invalid line_info[1].insn_off:0 ")),
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

/// Single-byte mutants of the corpus' `.BTF.ext`: no false accept, and where both judge the
/// program, the same verdict and message.
#[test]
fn btf_ext_mutants_agree_with_libbpf_and_the_kernel() {
    if !kernel_or_skip("btf_ext_mutants_agree_with_libbpf_and_the_kernel") {
        return;
    }
    let wanted: usize = std::env::var("BPFEMU_BTF_MUTANTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let seed = std::env::var("BPFEMU_MUTANT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let mut rng = Rng::new(seed);
    let objects = ["pass", "adjust_meta", "ddos_filter", "subprogs", "trace_printk", "xsk_dispatch"];
    let scratch = Scratch::new("btf_ext_mutants");
    let (mut judged, mut differ) = (0, Vec::new());
    for n in 0..wanted {
        let name = rng.pick(&objects);
        let original = format!("xdp/build/{name}.v3.o");
        let flip = 1 + rng.below(255) as u8;
        let pick = rng.below(u64::MAX);
        let mut what = String::new();
        let path = mutant(&scratch, &format!("m{n}.o"), &original, |elf| {
            let (off, size) = section(elf, ".BTF.ext").expect(".BTF.ext");
            let at = (pick % size as u64) as usize;
            elf[off + at] ^= flip;
            what = format!("{name} .BTF.ext+{at:#x} ^{flip:#04x}");
        });
        let program = LibbpfObject::open_file(std::path::Path::new(&path))
            .ok()
            .and_then(|o| o.programs().into_iter().next().map(|p| p.name));
        let ours = bpfemu_verdict(&path);
        let Some(program) = program else {
            // libbpf cannot open it: bpfemu must not judge it either.
            if ours.is_ok() {
                differ.push(format!("{what}: libbpf cannot open it, bpfemu judges it"));
            }
            continue;
        };
        let theirs = libbpf_verdict(&path, &program);
        judged += 1;
        match (theirs, ours) {
            (Ok(k), Ok(b)) if k == b => {}
            // libbpf refuses the program before the kernel sees it, bpfemu the object (a
            // subprogram without func_info): neither loads it.
            (Ok(Some(k)), Err(_)) if k.starts_with("libbpf: ") => {}
            (k, b) => differ.push(format!("{what}: kernel {k:?}, bpfemu {b:?}")),
        }
    }
    assert!(differ.is_empty(), "{} of {judged} differ:\n{}", differ.len(), differ.join("\n"));
    assert!(judged > wanted / 2, "too few mutants judged: {judged}");
}

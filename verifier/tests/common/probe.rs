//! The probe format: small kernel-syntax programs, several per file, each aimed at one rule.
//!
//! A file `verifier/probes/RULE.probes` holds probes that start at a `== NAME` line; the probe
//! is called `RULE/NAME`. Everything before the first `==` is the file's header, and its
//! declarations apply to every probe in the file; a probe may add its own. Declarations are
//! comment lines (the assembler skips them):
//!
//! ```text
//! ; map NAME: TYPE key K value V entries N [flags F] [extra X] [lock OFF] [timer OFF] [btf 1]
//! ```
//!
//! A frozen read-only data map (what libbpf makes of `.rodata`: an array of one element with
//! `BPF_F_RDONLY_PROG`, filled and frozen before the load) is declared with its contents, C
//! escapes `\0 \n \t \\ \xNN` allowed:
//!
//! ```text
//! ; rodata NAME: TEXT
//! ```
//!
//! `lock OFF` / `timer OFF` give the map BTF whose value type holds a `struct bpf_spin_lock` /
//! `struct bpf_timer` at byte OFF (`btf 1`: BTF with no such field); a probe using such a map
//! gets program BTF too, as clang objects have. TYPE is one of `hash`, `array`, `percpu_hash`, `percpu_array`, `lru_hash`, `prog_array`,
//! `devmap`, `cpumap`, `xskmap`, `ringbuf`, `lpm_trie`, `devmap_hash`, `arena` (`extra` is its `map_extra`, the user address
//! the kernel wants before it loads a program using the arena, as libbpf's mmap() gives one).
//!
//! The body is what [`bpfemu_isa::asm::assemble_kernel`] reads (labels allowed), plus the three
//! `ld_imm64` forms the kernel's own text cannot carry, spelt as the kernel's log prints them
//! with a name in place of the map id:
//!
//! - `r1 = map[NAME]`: the map (`src_reg` 1, BPF_PSEUDO_MAP_FD);
//! - `r1 = map[NAME][0]+OFF`: the address of byte OFF of the map's value (`src_reg` 2,
//!   BPF_PSEUDO_MAP_VALUE, arrays only);
//! - `r2 = func[LABEL]`: the subprogram at LABEL (`src_reg` 4, BPF_PSEUDO_FUNC), for callbacks.
//!
//! - `call kfunc[NAME]`: the kernel function NAME, by its id in the running kernel's BTF;
//! - `r1 = ksym[NAME]`: the address of the kernel variable or function NAME (`src_reg` 3,
//!   BPF_PSEUDO_BTF_ID, by its id in the running kernel's BTF);
//! - `r2 = type_id[union NAME]` (or `struct`, `int`): the id of that type in the running
//!   kernel's BTF, as a constant (what `bpf_core_type_id_kernel` gives);
//!
//! and, for encodings no text names (bad opcodes, reserved fields), one raw slot:
//! `.raw CODE DST SRC OFF IMM` (numbers, `0x` for hex, OFF and IMM signed).
//!
//! In the assembled program a map is named by its index in the probe's map list, as
//! bpfemu's loader names maps; the kernel side swaps in the fd. A probe that takes a function's
//! address gets BTF with one static `int f(void)` per subprogram (the kernel asks for func_info
//! then); `; btf` in a probe asks for it anyway.

use bpfemu_isa::RawInsn;
use bpfemu_isa::asm::assemble_kernel;
use std::path::{Path, PathBuf};

/// `enum bpf_map_type` values of the types probes may declare.
const MAP_TYPES: &[(&str, u32)] = &[
    ("hash", 1),
    ("array", 2),
    ("prog_array", 3),
    ("percpu_hash", 5),
    ("percpu_array", 6),
    ("lru_hash", 9),
    ("lpm_trie", 11),
    ("devmap", 14),
    ("cpumap", 16),
    ("xskmap", 17),
    ("sockmap", 15),
    ("sockhash", 18),
    ("devmap_hash", 25),
    ("ringbuf", 27),
    ("user_ringbuf", 31),
    ("arena", 33),
];

/// One map a probe uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeMap {
    pub name: String,
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
    /// `map_extra` (an arena's user address).
    pub map_extra: u64,
    /// Whether the map is created with BTF for its key and value.
    pub btf: bool,
    /// Special fields of the value type: (`bpf_spin_lock` or `bpf_timer`, byte offset).
    pub special: Vec<(&'static str, u32)>,
    /// The contents of a frozen read-only data map (`; rodata`).
    pub frozen: Option<Vec<u8>>,
}

/// One probe, assembled.
#[derive(Clone, Debug)]
pub struct Probe {
    /// `RULE/NAME`.
    pub name: String,
    /// Where it starts, for messages (`file:line`).
    pub place: String,
    pub maps: Vec<ProbeMap>,
    /// Map references hold the map's index in `maps` (`src_reg` 1 and 2).
    pub insns: Vec<RawInsn>,
    /// Whether the kernel gets BTF with func_info for the subprograms.
    pub btf: bool,
}

/// A malformed probe file: `file:line: what`.
#[derive(Debug)]
pub struct ProbeError(pub String);

impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The directory of the probe corpus.
pub fn probe_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("probes")
}

/// Every probe of every `*.probes` file under `dir`, sorted by name.
pub fn load_all(dir: &Path) -> Result<Vec<Probe>, ProbeError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| ProbeError(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "probes"))
        .collect();
    files.sort();
    let mut probes = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| ProbeError(format!("{}: {e}", file.display())))?;
        let rule = file.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
        probes.extend(parse_file(rule, &file.display().to_string(), &text)?);
    }
    let mut seen = std::collections::HashSet::new();
    for p in &probes {
        if !seen.insert(p.name.clone()) {
            return Err(ProbeError(format!(
                "{}: probe {} defined twice",
                p.place, p.name
            )));
        }
    }
    probes.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(probes)
}

/// Splits a file into probes and assembles each.
pub fn parse_file(rule: &str, file: &str, text: &str) -> Result<Vec<Probe>, ProbeError> {
    parse_each(rule, file, text)?.into_iter().collect()
}

/// Each probe of a file on its own: one that does not assemble (a kfunc the kernel lacks)
/// costs only itself. Errors in the file's header are the file's.
pub fn parse_each(
    rule: &str,
    file: &str,
    text: &str,
) -> Result<Vec<Result<Probe, ProbeError>>, ProbeError> {
    let mut header_maps = Vec::new();
    // (name, line of its `==`, body lines with their numbers)
    type Section<'t> = (String, usize, Vec<(usize, &'t str)>);
    let mut sections: Vec<Section<'_>> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        if let Some(name) = line.strip_prefix("==") {
            sections.push((name.trim().to_owned(), lineno, Vec::new()));
            continue;
        }
        match sections.last_mut() {
            Some((_, _, body)) => body.push((lineno, line)),
            None => {
                if let Some(map) = map_declaration(line)
                    .map_err(|e| ProbeError(format!("{file}:{lineno}: {e}")))?
                {
                    header_maps.push(map);
                }
            }
        }
    }
    let probes = sections
        .into_iter()
        .map(|(name, lineno, body)| {
            let place = format!("{file}:{lineno}");
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(ProbeError(format!("{place}: a probe name is one word")));
            }
            assemble_probe(format!("{rule}/{name}"), place, header_maps.clone(), &body)
        })
        .collect();
    Ok(probes)
}

/// `; map NAME: TYPE key K value V entries N [flags F]`, or `None` for any other line.
fn map_declaration(line: &str) -> Result<Option<ProbeMap>, String> {
    let Some(rest) = line.trim().strip_prefix(';').map(str::trim) else {
        return Ok(None);
    };
    if let Some(rodata) = rest.strip_prefix("rodata ") {
        return rodata_declaration(rodata).map(Some);
    }
    let Some(rest) = rest.strip_prefix("map ") else {
        return Ok(None);
    };
    let (name, spec) = rest
        .split_once(':')
        .ok_or("a map declaration is `; map NAME: TYPE key K value V entries N`")?;
    let words: Vec<&str> = spec.split_whitespace().collect();
    let type_name = words.first().ok_or("the map needs a type")?;
    let map_type = MAP_TYPES
        .iter()
        .find(|(n, _)| n == type_name)
        .map(|(_, t)| *t)
        .ok_or_else(|| format!("unknown map type `{type_name}`"))?;
    let mut map = ProbeMap {
        name: name.trim().to_owned(),
        map_type,
        key_size: 0,
        value_size: 0,
        max_entries: 0,
        map_flags: 0,
        map_extra: 0,
        btf: false,
        special: Vec::new(),
        frozen: None,
    };
    for pair in words[1..].chunks(2) {
        let [key, value] = pair else {
            return Err(format!("`{}` needs a value", pair[0]));
        };
        let n = parse_number(value).ok_or_else(|| format!("`{value}` is not a number"))?;
        match *key {
            "key" => map.key_size = n,
            "value" => map.value_size = n,
            "entries" => map.max_entries = n,
            "flags" => map.map_flags = n,
            "extra" => map.map_extra = n as u64,
            "lock" => map.special.push(("bpf_spin_lock", n)),
            "timer" => map.special.push(("bpf_timer", n)),
            "btf" => map.btf = n != 0,
            other => return Err(format!("unknown map attribute `{other}`")),
        }
    }
    map.btf |= !map.special.is_empty();
    Ok(Some(map))
}

/// `NAME: TEXT` of a `; rodata` line.
fn rodata_declaration(rest: &str) -> Result<ProbeMap, String> {
    const BPF_F_RDONLY_PROG: u32 = 1 << 7;
    let (name, text) = rest
        .split_once(':')
        .ok_or("a read-only data map is `; rodata NAME: TEXT`")?;
    let data = unescape(text.trim())?;
    Ok(ProbeMap {
        name: name.trim().to_owned(),
        map_type: 2,
        key_size: 4,
        value_size: data.len() as u32,
        max_entries: 1,
        map_flags: BPF_F_RDONLY_PROG,
        map_extra: 0,
        btf: false,
        special: Vec::new(),
        frozen: Some(data),
    })
}

/// The bytes of TEXT with its C escapes resolved.
fn unescape(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match bytes.next() {
            Some(b'0') => out.push(0),
            Some(b'n') => out.push(b'\n'),
            Some(b't') => out.push(b'\t'),
            Some(b'\\') => out.push(b'\\'),
            Some(b'x') => {
                let hex: Vec<u8> = bytes.by_ref().take(2).collect();
                let hex = std::str::from_utf8(&hex).map_err(|_| "bad \\x escape")?;
                out.push(u8::from_str_radix(hex, 16).map_err(|_| format!("bad \\x{hex}"))?);
            }
            other => return Err(format!("unknown escape {:?}", other.map(char::from))),
        }
    }
    Ok(out)
}

fn parse_number(text: &str) -> Option<u32> {
    match text.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// The high word of an `ld_imm64` that stands for a map reference; the low word indexes `refs`.
const MAP_MARKER: i32 = 0x7e57_0b0e;
/// The immediate of the two one-slot placeholders of a `func[LABEL]`.
const FUNC_MARKER: i32 = 0x7e57_0f0e;

/// The base of the immediate of the one-slot placeholder of a `.raw` line; `raws` index above.
const RAW_MARKER: i32 = 0x7e57_0000;

/// A map reference found in the text.
struct MapRef {
    map: usize,
    /// `Some(off)` for `map[NAME][0]+off`.
    value_off: Option<i32>,
}

fn assemble_probe(
    name: String,
    place: String,
    mut maps: Vec<ProbeMap>,
    body: &[(usize, &str)],
) -> Result<Probe, ProbeError> {
    let mut text = String::new();
    let mut refs = Vec::new();
    let mut raws = Vec::new();
    let mut btf = false;
    // The file line of each line of `text` (a function reference takes two).
    let mut origin = Vec::new();
    let file = place
        .rsplit_once(':')
        .map_or(place.as_str(), |(f, _)| f)
        .to_owned();
    for &(lineno, line) in body {
        let at = |e: String| ProbeError(format!("{file}:{lineno}: {e}"));
        if let Some(map) = map_declaration(line).map_err(at)? {
            maps.push(map);
        }
        if line.trim() == "; btf" {
            btf = true;
        }
        let code = line.split(';').next().unwrap_or("");
        let rewritten = if let Some(fields) = code.trim().strip_prefix(".raw ") {
            raws.push(raw_slot(fields).map_err(at)?);
            format!("r0 = {}", RAW_MARKER + raws.len() as i32 - 1)
        } else if code.contains("map[") {
            map_placeholder(code, &maps, &mut refs).map_err(at)?
        } else if let Some((dst, name)) = code
            .split_once("= ksym[")
            .and_then(|(d, n)| Some((d.trim(), n.trim().strip_suffix(']')?)))
        {
            let id = vmlinux_id(name, |k| {
                matches!(
                    k,
                    bpfemu_loader::btf::BtfKind::Var { .. }
                        | bpfemu_loader::btf::BtfKind::Func { .. }
                )
            })
            .map_err(at)?;
            let dst: u8 = dst
                .strip_prefix('r')
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| at(format!("`{dst}` is not a register")))?;
            raws.push(RawInsn::new(0x18, dst, 3, 0, id as i32));
            raws.push(RawInsn::new(0, 0, 0, 0, 0));
            format!(
                "r0 = {}\nr0 = {}",
                RAW_MARKER + raws.len() as i32 - 2,
                RAW_MARKER + raws.len() as i32 - 1
            )
        } else if let Some((dst, name)) = code
            .split_once("= type_id[")
            .and_then(|(d, n)| Some((d.trim(), n.trim().strip_suffix(']')?)))
        {
            format!("{dst} = {}", vmlinux_type_id(name).map_err(at)?)
        } else if let Some(name) = code.trim().strip_prefix("call kfunc[") {
            let name = name
                .strip_suffix(']')
                .ok_or("a kfunc call is `call kfunc[NAME]`");
            raws.push(kfunc_call(name.map_err(|e| at(e.to_owned()))?).map_err(at)?);
            format!("r0 = {}", RAW_MARKER + raws.len() as i32 - 1)
        } else if code.contains("func[") {
            btf = true;
            func_placeholder(code).map_err(at)?
        } else {
            line.to_owned()
        };
        for part in rewritten.lines() {
            text.push_str(part);
            text.push('\n');
            origin.push(lineno);
        }
    }
    let mut insns = assemble_kernel(&text).map_err(|e| {
        let lineno = origin.get(e.line.wrapping_sub(1)).copied().unwrap_or(0);
        ProbeError(format!(
            "{file}:{lineno}: column {}: {}",
            e.column, e.message
        ))
    })?;
    patch_placeholders(&mut insns, &refs, &raws);
    btf |= maps.iter().any(|m| m.btf);
    Ok(Probe {
        name,
        place,
        maps,
        insns,
        btf,
    })
}

/// `rN = map[NAME]` / `rN = map[NAME][0]+OFF` -> `rN = 0x<marker> ll`.
fn map_placeholder(
    code: &str,
    maps: &[ProbeMap],
    refs: &mut Vec<MapRef>,
) -> Result<String, String> {
    let (dst, rhs) = code
        .split_once('=')
        .ok_or("a map reference is `rN = map[NAME]`")?;
    let rhs = rhs.trim();
    let inner = rhs
        .strip_prefix("map[")
        .ok_or("a map reference is `rN = map[NAME]`")?;
    let (map_name, after) = inner.split_once(']').ok_or("missing `]`")?;
    let map = maps
        .iter()
        .position(|m| m.name == map_name)
        .ok_or_else(|| format!("map `{map_name}` is not declared"))?;
    let after = after.trim();
    let value_off = if after.is_empty() {
        None
    } else {
        let off = after
            .strip_prefix("[0]")
            .ok_or("a map value reference is `map[NAME][0]+OFF`")?
            .trim();
        let off = off.strip_prefix('+').unwrap_or(off).trim();
        Some(if off.is_empty() {
            0
        } else {
            off.parse::<i32>()
                .map_err(|_| format!("bad offset `{off}`"))?
        })
    };
    refs.push(MapRef { map, value_off });
    let word = ((MAP_MARKER as u32 as u64) << 32) | (refs.len() as u64 - 1);
    Ok(format!("{} = {word:#x} ll", dst.trim_end()))
}

/// `rN = func[LABEL]` -> a conditional jump to LABEL and a move, both carrying the marker; the
/// pair becomes the two-slot `ld_imm64` once the assembler has resolved the label.
fn func_placeholder(code: &str) -> Result<String, String> {
    let (dst, rhs) = code
        .split_once('=')
        .ok_or("a function reference is `rN = func[LABEL]`")?;
    let label = rhs
        .trim()
        .strip_prefix("func[")
        .and_then(|r| r.strip_suffix(']'))
        .ok_or("a function reference is `rN = func[LABEL]`")?;
    let dst = dst.trim();
    Ok(format!(
        "if {dst} == {FUNC_MARKER} goto {label}\n{dst} = {FUNC_MARKER}"
    ))
}

/// `call kfunc[NAME]`: a call of the kernel function NAME by its id in the running kernel's
/// BTF (`src_reg` 2, BPF_PSEUDO_KFUNC_CALL).
fn kfunc_call(name: &str) -> Result<RawInsn, String> {
    let id = vmlinux_id(name, |k| {
        matches!(k, bpfemu_loader::btf::BtfKind::Func { .. })
    })?;
    Ok(RawInsn::new(0x85, 0, 2, 0, id as i32))
}

/// `KIND NAME` (`struct`, `union` or `int`): the id of that type in the running kernel's BTF.
fn vmlinux_type_id(spec: &str) -> Result<u32, String> {
    use bpfemu_loader::btf::BtfKind;
    let (kind, name) = spec
        .split_once(' ')
        .ok_or("a type id is `type_id[KIND NAME]`")?;
    match kind {
        "struct" => vmlinux_id(name, |k| matches!(k, BtfKind::Struct { .. })),
        "union" => vmlinux_id(name, |k| matches!(k, BtfKind::Union { .. })),
        "int" => vmlinux_id(name, |k| matches!(k, BtfKind::Int { .. })),
        _ => Err(format!("`{kind}`: a type id names a struct, union or int")),
    }
}

/// The id of the type NAME of the kind `pred` accepts in the running kernel's BTF.
/// The kernel BTF that `kfunc[NAME]`, `ksym[NAME]` and type names resolve against: the
/// running kernel's, unless [`resolve_names_in`] named another before the first probe.
static NAMES_BTF: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Resolves kernel names in the BTF at `path` (a kernel bpfemu answers as, whose ids differ
/// from the running kernel's), for every probe parsed after. False when names were already
/// resolved elsewhere.
pub fn resolve_names_in(path: std::path::PathBuf) -> bool {
    NAMES_BTF.set(path).is_ok()
}

fn vmlinux_id(
    name: &str,
    pred: impl Fn(&bpfemu_loader::btf::BtfKind) -> bool,
) -> Result<u32, String> {
    use bpfemu_loader::btf::Btf;
    static VMLINUX: std::sync::OnceLock<Option<Btf>> = std::sync::OnceLock::new();
    let path = NAMES_BTF.get_or_init(|| "/sys/kernel/btf/vmlinux".into());
    let btf = VMLINUX
        .get_or_init(|| Btf::parse(&std::fs::read(path).ok()?).ok())
        .as_ref()
        .ok_or_else(|| format!("kernel symbols need {}", path.display()))?;
    btf.find_by_name_kind(name, pred)
        .ok_or_else(|| format!("no `{name}` of that kind in vmlinux BTF"))
}

/// `CODE DST SRC OFF IMM`.
fn raw_slot(fields: &str) -> Result<RawInsn, String> {
    let numbers: Vec<i64> = fields
        .split_whitespace()
        .map(|w| {
            let (neg, w) = w.strip_prefix('-').map_or((false, w), |w| (true, w));
            let n = match w.strip_prefix("0x") {
                Some(hex) => i64::from_str_radix(hex, 16),
                None => w.parse(),
            };
            n.map(|n| if neg { -n } else { n })
                .map_err(|_| format!("`{w}` is not a number"))
        })
        .collect::<Result<_, _>>()?;
    let [code, dst, src, off, imm] = numbers[..] else {
        return Err("`.raw` takes CODE DST SRC OFF IMM".to_owned());
    };
    Ok(RawInsn::new(
        code as u8, dst as u8, src as u8, off as i16, imm as i32,
    ))
}

fn patch_placeholders(insns: &mut [RawInsn], refs: &[MapRef], raws: &[RawInsn]) {
    const LD_IMM64: u8 = 0x18;
    const JEQ_K: u8 = 0x15;
    const MOV64_K: u8 = 0xb7;
    for slot in insns.iter_mut() {
        let index = slot.imm.wrapping_sub(RAW_MARKER);
        if slot.code == MOV64_K && slot.dst == 0 && (0..raws.len() as i32).contains(&index) {
            *slot = raws[index as usize];
        }
    }
    let mut pc = 0;
    while pc + 1 < insns.len() {
        let (head, next) = (insns[pc], insns[pc + 1]);
        if head.code == LD_IMM64 && head.src == 0 && next.imm == MAP_MARKER {
            let r = &refs[head.imm as usize];
            insns[pc].src = if r.value_off.is_some() { 2 } else { 1 };
            insns[pc].imm = r.map as i32;
            insns[pc + 1].imm = r.value_off.unwrap_or(0);
            pc += 2;
        } else if head.code == JEQ_K
            && head.imm == FUNC_MARKER
            && next.code == MOV64_K
            && next.imm == FUNC_MARKER
        {
            insns[pc] = RawInsn::new(LD_IMM64, head.dst, 4, 0, head.off as i32);
            insns[pc + 1] = RawInsn::new(0, 0, 0, 0, 0);
            pc += 2;
        } else {
            pc += if head.code == LD_IMM64 { 2 } else { 1 };
        }
    }
}

/// Where each subprogram starts: pc 0, every local call's target and every function address.
pub fn subprog_starts(insns: &[RawInsn]) -> Vec<u32> {
    let mut starts = vec![0u32];
    let mut pc = 0;
    while pc < insns.len() {
        let i = insns[pc];
        let is_local_call = i.code == 0x85 && i.src == 1;
        let is_func = i.code == 0x18 && i.src == 4;
        if is_local_call || is_func {
            let target = pc as i64 + 1 + i.imm as i64;
            if (0..insns.len() as i64).contains(&target) {
                starts.push(target as u32);
            }
        }
        pc += if i.code == 0x18 { 2 } else { 1 };
    }
    starts.sort_unstable();
    starts.dedup();
    starts
}

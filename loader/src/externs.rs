//! `extern` symbols: `.kconfig` variables (filled from the kernel config, or by the loader for
//! `LINUX_*`) and `.ksyms` (kernel variables and kfuncs, found by name in the target BTF).
//!
//! Follows libbpf's `bpf_object__collect_externs` (which extern lives where, sizes, alignment,
//! the order that lays out the `.kconfig` map), `bpf_object__init_kconfig_map`,
//! `bpf_object__resolve_externs` and `bpf_object__resolve_ksym_{var,func}_btf_id`.

use crate::btf::{Btf, BtfKind, Linkage, TypeId};
use crate::elf::{ElfObject, STB_WEAK};
use crate::error::LoadError;
use crate::kernel::Kernel;
use crate::maps::{MapPlace, MapTable, PlaceKind, internal_map};
use crate::object::MapOrigin;
use std::cmp::Ordering;
use std::io::Read;
use std::path::{Path, PathBuf};

/// How a `.kconfig` value is stored (libbpf's `enum kcfg_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KcfgType {
    Bool,
    Char,
    Tristate,
    Int,
    CharArray,
}

#[derive(Clone, Debug)]
pub enum ExternKind {
    Kconfig {
        ty: KcfgType,
        signed: bool,
        size: u32,
        align: u32,
        data_off: u32,
    },
    Ksym {
        /// The local type after modifiers (0: a typeless ksym, resolved from kallsyms).
        type_id: TypeId,
        is_func: bool,
        /// The target BTF id once resolved.
        target_id: Option<u32>,
    },
}

#[derive(Clone, Debug)]
pub struct Extern {
    pub name: String,
    pub sym_idx: usize,
    pub weak: bool,
    pub kind: ExternKind,
    /// Whether a value was found (unset weak externs read as zero).
    pub is_set: bool,
}

fn extern_error(file: &str, name: &str, message: impl Into<String>) -> LoadError {
    LoadError::Extern {
        file: file.into(),
        name: name.into(),
        message: message.into(),
    }
}

/// Every extern symbol, sorted as libbpf sorts them (kconfig before ksyms; kconfig by
/// alignment descending, size ascending, name), with `.kconfig` offsets laid out.
pub fn collect(elf: &ElfObject<'_>, btf: Option<&Btf>) -> Result<Vec<Extern>, LoadError> {
    let mut externs = Vec::new();
    for (sym_idx, sym) in elf.symbols.iter().enumerate() {
        if !sym.is_extern() || sym.name.is_empty() {
            continue;
        }
        let btf = btf.ok_or_else(|| {
            extern_error(&elf.file, &sym.name, "externs need BTF, and there is none")
        })?;
        let kind = classify(&elf.file, btf, &sym.name)?;
        externs.push(Extern {
            name: sym.name.clone(),
            sym_idx,
            weak: sym.bind == STB_WEAK,
            kind,
            is_set: false,
        });
    }
    externs.sort_by(compare_externs);
    layout_kconfig(&mut externs);
    Ok(externs)
}

fn classify(file: &str, btf: &Btf, name: &str) -> Result<ExternKind, LoadError> {
    let err = |m: String| extern_error(file, name, m);
    let id = btf
        .find_by_name_kind(name, |k| {
            matches!(k, BtfKind::Var { .. } | BtfKind::Func { .. })
        })
        .ok_or_else(|| err("no BTF VAR or FUNC of that name".into()))?;
    let (ty, is_func) = match btf.get(id).map(|t| &t.kind) {
        Some(BtfKind::Var {
            ty,
            linkage: Linkage::Extern,
        }) => (*ty, false),
        Some(BtfKind::Func {
            proto,
            linkage: Linkage::Extern,
        }) => (*proto, true),
        _ => return Err(err("its BTF declaration is not extern".into())),
    };
    let section = datasec_of(btf, id).ok_or_else(|| err("in no BTF DATASEC".into()))?;
    match section.as_str() {
        ".kconfig" if is_func => Err(err("extern functions are not allowed in .kconfig".into())),
        ".kconfig" => kconfig_kind(btf, ty).map_err(err),
        ".ksyms" => Ok(ExternKind::Ksym {
            type_id: btf.skip_mods_and_typedefs(ty).unwrap_or(0),
            is_func,
            target_id: None,
        }),
        other => Err(err(format!("unrecognized extern section '{other}'"))),
    }
}

fn datasec_of(btf: &Btf, var: TypeId) -> Option<String> {
    btf.types.iter().find_map(|t| match &t.kind {
        BtfKind::DataSec { vars, .. } if vars.iter().any(|v| v.ty == var) => Some(t.name.clone()),
        _ => None,
    })
}

fn kconfig_kind(btf: &Btf, ty: TypeId) -> Result<ExternKind, String> {
    let size = btf
        .size_of(ty)
        .filter(|&s| s > 0)
        .ok_or("cannot size the type")?;
    let align = align_of(btf, ty, 0).ok_or("cannot align the type")?;
    let (kcfg, signed) = kcfg_type(btf, ty).ok_or("type is unsupported")?;
    Ok(ExternKind::Kconfig {
        ty: kcfg,
        signed,
        size,
        align,
        data_off: 0,
    })
}

/// libbpf's `find_kcfg_type`.
fn kcfg_type(btf: &Btf, ty: TypeId) -> Option<(KcfgType, bool)> {
    let id = btf.skip_mods_and_typedefs(ty)?;
    let t = btf.get(id)?;
    match &t.kind {
        BtfKind::Int { size, encoding, .. } => {
            if encoding.bool {
                return (*size == 1).then_some((KcfgType::Bool, false));
            }
            match size {
                1 => Some((KcfgType::Char, encoding.signed)),
                2 | 4 | 8 => Some((KcfgType::Int, encoding.signed)),
                _ => None,
            }
        }
        BtfKind::Enum { size: 4, .. } | BtfKind::Enum64 { .. } if t.name == "libbpf_tristate" => {
            Some((KcfgType::Tristate, false))
        }
        BtfKind::Array { elem, len, .. } if *len > 0 => {
            matches!(kcfg_type(btf, *elem), Some((KcfgType::Char, _)))
                .then_some((KcfgType::CharArray, false))
        }
        _ => None,
    }
}

/// libbpf's `btf__align_of`: natural alignment, capped at 8.
fn align_of(btf: &Btf, ty: TypeId, depth: u32) -> Option<u32> {
    if depth > 32 {
        return None;
    }
    let t = btf.get(ty)?;
    match &t.kind {
        BtfKind::Int { size, .. }
        | BtfKind::Enum { size, .. }
        | BtfKind::Enum64 { size, .. }
        | BtfKind::Float { size } => Some((*size).clamp(1, 8)),
        BtfKind::Ptr { .. } => Some(8),
        BtfKind::Array { elem, .. } => align_of(btf, *elem, depth + 1),
        BtfKind::Struct { members, .. } | BtfKind::Union { members, .. } => {
            let mut max = 1;
            for m in members {
                max = max.max(align_of(btf, m.ty, depth + 1)?);
            }
            Some(max)
        }
        other => align_of(btf, other.referenced()?, depth + 1),
    }
}

fn compare_externs(a: &Extern, b: &Extern) -> Ordering {
    match (&a.kind, &b.kind) {
        (
            ExternKind::Kconfig {
                align: aa,
                size: sa,
                ..
            },
            ExternKind::Kconfig {
                align: ab,
                size: sb,
                ..
            },
        ) => ab
            .cmp(aa)
            .then(sa.cmp(sb))
            .then_with(|| a.name.cmp(&b.name)),
        (ExternKind::Kconfig { .. }, ExternKind::Ksym { .. }) => Ordering::Less,
        (ExternKind::Ksym { .. }, ExternKind::Kconfig { .. }) => Ordering::Greater,
        _ => a.name.cmp(&b.name),
    }
}

fn layout_kconfig(externs: &mut [Extern]) {
    let mut off = 0u32;
    for ext in externs {
        if let ExternKind::Kconfig {
            size,
            align,
            data_off,
            ..
        } = &mut ext.kind
        {
            *data_off = off.next_multiple_of(*align);
            off = *data_off + *size;
        }
    }
}

/// Size of the `.kconfig` map: the end of the last kconfig extern.
fn kconfig_size(externs: &[Extern]) -> Option<u32> {
    externs
        .iter()
        .filter_map(|e| match e.kind {
            ExternKind::Kconfig { size, data_off, .. } => Some(data_off + size),
            _ => None,
        })
        .next_back()
}

/// libbpf's `bpf_object__init_kconfig_map`: a read-only one-element array after the data maps.
pub fn kconfig_map(
    obj_name: &str,
    externs: &[Extern],
    btf: Option<&Btf>,
    table: &mut MapTable,
    symtab: usize,
) {
    let Some(size) = kconfig_size(externs) else {
        return;
    };
    let spec = internal_map(
        obj_name,
        ".kconfig",
        size,
        true,
        btf,
        vec![0; size as usize],
        MapOrigin::Kconfig,
    );
    let place = MapPlace {
        sec_idx: symtab,
        sec_offset: 0,
        size: size.into(),
        kind: PlaceKind::Kconfig,
    };
    table.push(spec, place);
}

// ---------------------------------------------------------------------------------------------
// Resolution.

/// The BTF ksyms and CO-RE resolve against: the kernel's, read only when an object needs it;
/// its errors name the object.
pub struct TargetBtf<'k> {
    kernel: &'k Kernel,
    file: String,
}

impl<'k> TargetBtf<'k> {
    pub fn new(file: &str, kernel: &'k Kernel) -> Self {
        TargetBtf {
            kernel,
            file: file.into(),
        }
    }

    pub fn get(&mut self) -> Result<&'k Btf, LoadError> {
        self.kernel.btf().map_err(|e| LoadError::TargetBtf {
            file: self.file.clone(),
            path: e.path,
            message: e.message,
        })
    }
}

/// Fills kconfig values into the `.kconfig` map and finds ksyms in the target BTF; unresolved
/// strong externs are errors, unresolved weak ones stay zero. Returns warnings.
pub fn resolve(
    file: &str,
    externs: &mut [Extern],
    table: &mut MapTable,
    kconfig_path: Option<&Path>,
    local: Option<&Btf>,
    target: &mut TargetBtf<'_>,
) -> Result<Vec<String>, LoadError> {
    let mut warnings = Vec::new();
    if let Some(map) = table.kconfig() {
        let data = table.specs[map].initial.get_or_insert_with(Vec::new);
        resolve_kconfig(file, externs, data, kconfig_path)?;
    }
    for ext in externs.iter_mut() {
        if let ExternKind::Ksym {
            type_id,
            is_func,
            target_id,
        } = &mut ext.kind
        {
            if *type_id == 0 {
                warnings.push(format!(
                    "extern '{}': typeless ksym; its kernel address is left 0",
                    ext.name
                ));
                ext.is_set = true;
                continue;
            }
            let kernel = target.get()?;
            *target_id = find_ksym(kernel, &ext.name, *is_func);
            if let (Some(local), Some(found)) = (local, *target_id)
                && let Some(why) = incompatible(local, *type_id, kernel, found, *is_func)
            {
                if !ext.weak {
                    return Err(extern_error(file, &ext.name, why));
                }
                *target_id = None;
            }
            ext.is_set = target_id.is_some();
        }
    }
    for ext in externs.iter() {
        if !ext.is_set && !ext.weak {
            let what = match ext.kind {
                ExternKind::Ksym { is_func: true, .. } => "kfunc not found in the target BTF",
                ExternKind::Ksym { .. } => "kernel variable not found in the target BTF",
                ExternKind::Kconfig { .. } => "no value in the kernel config",
            };
            return Err(extern_error(file, &ext.name, what));
        }
    }
    Ok(warnings)
}

/// libbpf's check that a ksym's declared type fits the kernel's (`bpf_core_types_are_compat`
/// of the function prototypes, or of the variable types after modifiers and typedefs): `None`
/// when it does, else libbpf's words for the refusal. A weak extern that does not fit is left
/// unresolved, as libbpf leaves it.
fn incompatible(
    local: &Btf,
    local_type: TypeId,
    kernel: &Btf,
    found: u32,
    is_func: bool,
) -> Option<String> {
    let kernel_type = match kernel.get(found).map(|t| &t.kind) {
        Some(BtfKind::Func { proto, .. }) if is_func => *proto,
        Some(BtfKind::Var { ty, .. }) if !is_func => kernel.skip_mods_and_typedefs(*ty)?,
        _ => return None,
    };
    let compatible =
        crate::core_relo::compat::types_are_compat(local, local_type, kernel, kernel_type, 32)
            .unwrap_or(false);
    if compatible {
        return None;
    }
    if is_func {
        return Some(format!(
            "func_proto [{local_type}] incompatible with vmlinux [{kernel_type}]"
        ));
    }
    let describe = |btf: &Btf, id: TypeId| {
        btf.get(id).map_or(String::from("? ?"), |t| {
            format!("{} {}", t.kind.kind_name(), t.name)
        })
    };
    Some(format!(
        "incompatible types, expected [{local_type}] {}, but kernel has [{kernel_type}] {}",
        describe(local, local_type),
        describe(kernel, kernel_type)
    ))
}

/// A kfunc by its essential name (`foo___v2` is `foo`), a variable by its name.
fn find_ksym(btf: &Btf, name: &str, is_func: bool) -> Option<u32> {
    if is_func {
        let essential = essential_name(name);
        btf.find_by_name_kind(essential, |k| matches!(k, BtfKind::Func { .. }))
    } else {
        btf.find_by_name_kind(name, |k| matches!(k, BtfKind::Var { .. }))
    }
}

/// libbpf's `bpf_core_essential_name_len`: a name up to its last `___`.
pub fn essential_name(name: &str) -> &str {
    match name.rfind("___") {
        Some(i) if i > 0 => &name[..i],
        _ => name,
    }
}

fn resolve_kconfig(
    file: &str,
    externs: &mut [Extern],
    data: &mut [u8],
    kconfig_path: Option<&Path>,
) -> Result<(), LoadError> {
    let mut need_config = false;
    for ext in externs.iter_mut() {
        if !matches!(ext.kind, ExternKind::Kconfig { .. }) {
            continue;
        }
        if ext.name.starts_with("CONFIG_") {
            need_config = true;
            continue;
        }
        let value = match ext.name.as_str() {
            "LINUX_KERNEL_VERSION" => kernel_version()
                .ok_or_else(|| extern_error(file, &ext.name, "cannot read the kernel version"))?,
            // 6.18 on x86-64 has BPF cookies and syscall wrappers.
            "LINUX_HAS_BPF_COOKIE" | "LINUX_HAS_SYSCALL_WRAPPER" => 1,
            _ if ext.name.starts_with("LINUX_") && ext.weak => 0,
            _ => return Err(extern_error(file, &ext.name, "unrecognized virtual extern")),
        };
        set_num(ext, data, value).map_err(|m| extern_error(file, &ext.name, m))?;
    }
    if need_config {
        let (path, text) =
            read_kconfig(kconfig_path).map_err(|m| extern_error(file, "CONFIG_*", m))?;
        for line in text.lines() {
            apply_kconfig_line(externs, data, line).map_err(|(name, m)| {
                extern_error(file, &name, format!("{}: {m}", path.display()))
            })?;
        }
    }
    Ok(())
}

/// The given config file, else `/boot/config-$(uname -r)`, else `/proc/config.gz` (libbpf's
/// order); gzip is recognised by its magic, as `gzopen` does.
fn read_kconfig(path: Option<&Path>) -> Result<(PathBuf, String), String> {
    let candidates = match path {
        Some(p) => vec![p.to_path_buf()],
        None => {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
            vec![
                PathBuf::from(format!("/boot/config-{}", release.trim())),
                PathBuf::from("/proc/config.gz"),
            ]
        }
    };
    for candidate in &candidates {
        let Ok(bytes) = std::fs::read(candidate) else {
            continue;
        };
        let text = if bytes.starts_with(&[0x1f, 0x8b]) {
            let mut out = String::new();
            flate2::read::GzDecoder::new(&bytes[..])
                .read_to_string(&mut out)
                .map_err(|e| format!("{}: {e}", candidate.display()))?;
            out
        } else {
            String::from_utf8_lossy(&bytes).into_owned()
        };
        return Ok((candidate.clone(), text));
    }
    Err(format!(
        "cannot read a kernel config (tried {})",
        candidates
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// libbpf's `bpf_object__process_kconfig_line`.
fn apply_kconfig_line(
    externs: &mut [Extern],
    data: &mut [u8],
    line: &str,
) -> Result<(), (String, String)> {
    if !line.starts_with("CONFIG_") {
        return Ok(());
    }
    let Some((name, value)) = line.split_once('=') else {
        return Err((line.into(), "no '=' in config line".into()));
    };
    if value.is_empty() {
        return Err((name.into(), "no value in config line".into()));
    }
    let Some(ext) = externs.iter_mut().find(|e| e.name == name) else {
        return Ok(());
    };
    if ext.is_set || !matches!(ext.kind, ExternKind::Kconfig { .. }) {
        return Ok(());
    }
    let result = match value.as_bytes()[0] {
        b'y' | b'n' | b'm' => set_tristate(ext, data, value.as_bytes()[0]),
        b'"' => set_string(ext, data, value),
        _ => parse_u64(value).and_then(|v| set_int_only(ext, data, v)),
    };
    result.map_err(|m| (name.into(), m))
}

fn slot<'d>(ext: &Extern, data: &'d mut [u8]) -> Result<&'d mut [u8], String> {
    let ExternKind::Kconfig { size, data_off, .. } = ext.kind else {
        return Err("not a kconfig extern".into());
    };
    data.get_mut(data_off as usize..(data_off + size) as usize)
        .ok_or_else(|| "value outside the .kconfig map".into())
}

fn kcfg(ext: &Extern) -> (KcfgType, bool, u32) {
    match ext.kind {
        ExternKind::Kconfig {
            ty, signed, size, ..
        } => (ty, signed, size),
        ExternKind::Ksym { .. } => unreachable!("kconfig extern expected"),
    }
}

fn set_tristate(ext: &mut Extern, data: &mut [u8], value: u8) -> Result<(), String> {
    let byte = match (kcfg(ext).0, value) {
        (KcfgType::Bool, b'm') => return Err("value 'm' implies tristate or char".into()),
        (KcfgType::Bool, v) => u8::from(v == b'y'),
        (KcfgType::Tristate, b'y') => 1,
        (KcfgType::Tristate, b'm') => 2,
        (KcfgType::Tristate, _) => 0,
        (KcfgType::Char, v) => v,
        _ => {
            return Err(format!(
                "value '{}' implies bool, tristate or char",
                value as char
            ));
        }
    };
    let out = slot(ext, data)?;
    out.fill(0);
    out[0] = byte;
    ext.is_set = true;
    Ok(())
}

fn set_string(ext: &mut Extern, data: &mut [u8], value: &str) -> Result<(), String> {
    if kcfg(ext).0 != KcfgType::CharArray {
        return Err(format!("value {value} implies a char array"));
    }
    if value.len() < 2 || !value.ends_with('"') {
        return Err(format!("invalid string config {value}"));
    }
    let text = &value.as_bytes()[1..value.len() - 1];
    let out = slot(ext, data)?;
    let len = text.len().min(out.len() - 1);
    out.fill(0);
    out[..len].copy_from_slice(&text[..len]);
    ext.is_set = true;
    Ok(())
}

/// `strtoull(value, &end, 0)`: decimal, `0x` hex or leading-`0` octal, all of it.
fn parse_u64(value: &str) -> Result<u64, String> {
    let parsed = if let Some(hex) = value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
    {
        u64::from_str_radix(hex, 16)
    } else if value.len() > 1 && value.starts_with('0') {
        u64::from_str_radix(&value[1..], 8)
    } else if let Some(neg) = value.strip_prefix('-') {
        neg.parse::<u64>().map(u64::wrapping_neg)
    } else {
        value.parse::<u64>()
    };
    parsed.map_err(|_| format!("value '{value}' is not a valid integer"))
}

fn set_int_only(ext: &mut Extern, data: &mut [u8], value: u64) -> Result<(), String> {
    if !matches!(kcfg(ext).0, KcfgType::Int | KcfgType::Char) {
        return Err(format!("value '{value}' implies an integer type"));
    }
    set_num(ext, data, value)
}

/// libbpf's `set_kcfg_value_num` with its range check.
fn set_num(ext: &mut Extern, data: &mut [u8], value: u64) -> Result<(), String> {
    let (ty, signed, size) = kcfg(ext);
    if !matches!(ty, KcfgType::Int | KcfgType::Char | KcfgType::Bool) {
        return Err(format!("value '{value}' implies integer, char or bool"));
    }
    if ty == KcfgType::Bool && value > 1 {
        return Err(format!("value '{value}' is not boolean"));
    }
    if !fits(value, size, signed) {
        return Err(format!("value '{value}' does not fit in {size} bytes"));
    }
    let out = slot(ext, data)?;
    out.copy_from_slice(&value.to_le_bytes()[..size as usize]);
    ext.is_set = true;
    Ok(())
}

fn fits(value: u64, size: u32, signed: bool) -> bool {
    if size >= 8 {
        return true;
    }
    let bits = size * 8;
    if signed {
        value.wrapping_add(1 << (bits - 1)) < (1 << bits)
    } else {
        value >> bits == 0
    }
}

/// libbpf's `get_kernel_version`: Ubuntu's signature, Debian's version string, else the
/// release, as `KERNEL_VERSION(a, b, min(c, 255))`.
fn kernel_version() -> Option<u64> {
    let from = |text: &str| -> Option<u64> {
        let mut parts = text
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty());
        let mut next = || parts.next()?.parse::<u64>().ok();
        let (a, b, c) = (next()?, next()?, next()?);
        Some((a << 16) + (b << 8) + c.min(255))
    };
    if let Ok(sig) = std::fs::read_to_string("/proc/version_signature")
        && let Some(v) = sig.split_whitespace().nth(2).and_then(from)
    {
        return Some(v);
    }
    if let Ok(version) = std::fs::read_to_string("/proc/sys/kernel/version")
        && let Some(at) = version.find("Debian ")
        && let Some(v) = from(&version[at + 7..])
    {
        return Some(v);
    }
    from(
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()?
            .trim(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_like_strtoull() {
        assert_eq!(parse_u64("42"), Ok(42));
        assert_eq!(parse_u64("0x10"), Ok(16));
        assert_eq!(parse_u64("010"), Ok(8));
        assert!(parse_u64("12abc").is_err());
    }

    #[test]
    fn range_checks_follow_libbpf() {
        assert!(fits(255, 1, false));
        assert!(!fits(256, 1, false));
        assert!(fits((-128i64) as u64, 1, true));
        assert!(!fits(128, 1, true));
    }

    #[test]
    fn essential_names_drop_flavours() {
        assert_eq!(essential_name("bpf_foo___v2"), "bpf_foo");
        assert_eq!(essential_name("bpf_foo"), "bpf_foo");
    }
}

//! What `BPF_BTF_LOAD` refuses in a blob bpfemu's parser reads without complaint: the per-type
//! checks of 6.18's `btf_check_all_metas` (kernel/bpf/btf.c, each kind's `check_meta`) that
//! the data model does not make impossible. The parser runs them on every type of the ELF's
//! blob and keeps the first refusal; DATASECs, which libbpf fixes up before the load (sizes,
//! offsets, extern entries), are checked on the blob the kernel is given instead
//! ([`super::Btf::kernel_refusal`]). libbpf 1.7 goes on without the object's BTF in the kernel
//! when it is refused (no func_info, no line_info, maps without BTF), and the load path
//! models that.
//!
//! Only the verdict matters here, not the kernel's log text: the message names the type and
//! the rule for bpfemu's note.

use super::types::{Btf, BtfKind, Linkage, Member, TypeId, VarSecInfo};

/// `KSYM_NAME_LEN`: the longest name the kernel takes.
const NAME_MAX: usize = 512;
/// The bits of `btf_type.info` a kind may use (`BTF_INFO_MASK`).
const INFO_MASK: u32 = 0x9f00_ffff;
/// The bits of an INT's data word the kernel reads (`BTF_INT_MASK`); the top four must be 0.
const INT_MASK: u32 = 0x0fff_ffff;
/// `BTF_MAX_TYPE`: the largest type id.
const MAX_TYPE: u32 = 0x000f_ffff;

/// One raw type record as the parser saw it.
pub(crate) struct RawType<'a> {
    pub id: TypeId,
    pub info: u32,
    pub name_off: u32,
    /// The blob's string section: names are checked byte for byte, as the kernel reads them.
    pub strings: &'a [u8],
    pub size_or_type: u32,
    /// The INT data word (0 for other kinds).
    pub int_word: u32,
    /// The name offsets of the members, enumerators or parameters, in order.
    pub record_names: Vec<u32>,
}

impl RawType<'_> {
    fn vlen(&self) -> u32 {
        self.info & 0xffff
    }

    fn kflag(&self) -> bool {
        self.info >> 31 == 1
    }

    fn name(&self) -> &[u8] {
        name_at(self.strings, self.name_off)
    }
}

/// The NUL-terminated bytes at `off` (empty when out of range: the parser refused those).
fn name_at(strings: &[u8], off: u32) -> &[u8] {
    let tail = strings.get(off as usize..).unwrap_or_default();
    &tail[..tail.iter().position(|&b| b == 0).unwrap_or(tail.len())]
}

/// The kernel's `isalpha` (lib/ctype.c: Latin-1 letters count, but for × and ÷).
fn is_alpha(b: u8) -> bool {
    b.is_ascii_alphabetic() || (b >= 0xc0 && b != 0xd7 && b != 0xf7)
}

/// The kernel's `isprint`: ASCII graphic characters and space, and Latin-1 from 0xa0.
fn is_print(b: u8) -> bool {
    (0x20..=0x7e).contains(&b) || b >= 0xa0
}

/// `btf_name_valid_identifier`: a C identifier that may also hold dots.
fn is_identifier(name: &[u8]) -> bool {
    let ok = |b: u8, first: bool| {
        let letter = if first {
            is_alpha(b)
        } else {
            is_alpha(b) || b.is_ascii_digit()
        };
        letter || b == b'_' || b == b'.'
    };
    match name.split_first() {
        Some((&first, rest)) => {
            ok(first, true) && name.len() <= NAME_MAX && rest.iter().all(|&b| ok(b, false))
        }
        None => false,
    }
}

/// `btf_name_valid_section`: printable and not empty.
fn is_section_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty() && bytes.len() <= NAME_MAX && bytes.iter().all(|&b| is_print(b))
}

fn is_type_id(id: TypeId) -> bool {
    id <= MAX_TYPE
}

/// The first check of `t` the kernel fails, as "[id] rule".
pub(crate) fn refusal(t: &RawType<'_>, kind: &BtfKind) -> Option<String> {
    let problem = common(t).or_else(|| by_kind(t, kind))?;
    Some(format!("[{}] {problem}", t.id))
}

fn common(t: &RawType<'_>) -> Option<&'static str> {
    (t.info & !INFO_MASK != 0).then_some("Invalid btf_info")
}

fn by_kind(t: &RawType<'_>, kind: &BtfKind) -> Option<&'static str> {
    match kind {
        BtfKind::Void => None,
        BtfKind::Int { .. } => int(t),
        BtfKind::Ptr { ty }
        | BtfKind::Volatile { ty }
        | BtfKind::Const { ty }
        | BtfKind::Restrict { ty } => reference(t, *ty, Naming::None),
        BtfKind::Typedef { ty } => reference(t, *ty, Naming::Identifier),
        BtfKind::TypeTag { ty } => reference(t, *ty, Naming::NonEmpty),
        BtfKind::Array { .. } => array(t),
        BtfKind::Struct { size, members } => members_of(t, *size, members, false),
        BtfKind::Union { size, members } => members_of(t, *size, members, true),
        BtfKind::Enum { size, .. } | BtfKind::Enum64 { size, .. } => enumeration(t, *size),
        BtfKind::Fwd { .. } => fwd(t),
        BtfKind::Func { linkage, .. } => func(t, *linkage),
        BtfKind::FuncProto { .. } => func_proto(t),
        BtfKind::Var { ty, linkage } => var(t, *ty, *linkage),
        // The rest is checked on the blob libbpf sends (`datasec_refusal`): libbpf fixes
        // sizes and offsets, never the kind flag.
        BtfKind::DataSec { .. } => t.kflag().then_some("Invalid btf_info kind_flag"),
        BtfKind::Float { size } => float(t, *size),
        BtfKind::DeclTag { component_idx, .. } => decl_tag(t, *component_idx),
    }
}

/// `btf_int_check_meta`.
fn int(t: &RawType<'_>) -> Option<&'static str> {
    let word = t.int_word;
    let bits = word & 0xff;
    let offset = (word >> 16) & 0xff;
    let encoding = (word >> 24) & 0x0f;
    if t.vlen() != 0 {
        Some("vlen != 0")
    } else if t.kflag() {
        Some("Invalid btf_info kind_flag")
    } else if word & !INT_MASK != 0 {
        Some("Invalid int_data")
    } else if bits + offset > 128 {
        Some("nr_bits exceeds 128")
    } else if (bits + offset).div_ceil(8) > t.size_or_type {
        Some("nr_bits exceeds type_size")
    } else if !matches!(encoding, 0 | 1 | 2 | 4) {
        Some("Unsupported encoding")
    } else {
        None
    }
}

/// Which name a modifier or typedef may have.
enum Naming {
    /// PTR, CONST, VOLATILE, RESTRICT: none.
    None,
    /// TYPEDEF: a valid identifier.
    Identifier,
    /// TYPE_TAG: any non-empty string.
    NonEmpty,
}

/// `btf_ref_type_check_meta`.
fn reference(t: &RawType<'_>, ty: TypeId, naming: Naming) -> Option<&'static str> {
    let named_ok = match naming {
        Naming::None => t.name_off == 0,
        Naming::Identifier => is_identifier(t.name()),
        Naming::NonEmpty => !t.name().is_empty(),
    };
    let kflag_ok = !t.kflag() || matches!(naming, Naming::NonEmpty);
    if t.vlen() != 0 {
        Some("vlen != 0")
    } else if !kflag_ok {
        Some("Invalid btf_info kind_flag")
    } else if !is_type_id(ty) {
        Some("Invalid type_id")
    } else if !named_ok {
        Some("Invalid name")
    } else {
        None
    }
}

/// `btf_array_check_meta`.
fn array(t: &RawType<'_>) -> Option<&'static str> {
    if t.name_off != 0 {
        Some("Invalid name")
    } else if t.vlen() != 0 {
        Some("vlen != 0")
    } else if t.kflag() {
        Some("Invalid btf_info kind_flag")
    } else if t.size_or_type != 0 {
        Some("size != 0")
    } else {
        None
    }
}

/// `btf_struct_check_meta`.
fn members_of(t: &RawType<'_>, size: u32, members: &[Member], union: bool) -> Option<&'static str> {
    if t.name_off != 0 && !is_identifier(t.name()) {
        return Some("Invalid name");
    }
    let mut last_offset = 0;
    for (m, &name_off) in members.iter().zip(&t.record_names) {
        if name_off != 0 && !is_identifier(name_at(t.strings, name_off)) {
            return Some("Invalid name");
        }
        if m.ty == 0 || !is_type_id(m.ty) {
            return Some("Invalid type_id");
        }
        // Members come in offset order (equal offsets allowed: a last `char a[0]`).
        if (union && m.bit_offset != 0) || m.bit_offset < last_offset {
            return Some("Invalid member bits_offset");
        }
        last_offset = m.bit_offset;
        if m.bit_offset.div_ceil(8) > size {
            return Some("Member bits_offset exceeds its struct size");
        }
    }
    None
}

/// `btf_enum_check_meta` and `btf_enum64_check_meta`.
fn enumeration(t: &RawType<'_>, size: u32) -> Option<&'static str> {
    let bad_value = |&off: &u32| off == 0 || !is_identifier(name_at(t.strings, off));
    let bad_name = t.name_off != 0 && !is_identifier(t.name());
    if !size.is_power_of_two() || size > 8 {
        Some("Unexpected size")
    } else if bad_name || t.record_names.iter().any(bad_value) {
        Some("Invalid name")
    } else {
        None
    }
}

/// `btf_fwd_check_meta`.
fn fwd(t: &RawType<'_>) -> Option<&'static str> {
    if t.vlen() != 0 {
        Some("vlen != 0")
    } else if t.size_or_type != 0 {
        Some("type != 0")
    } else if !is_identifier(t.name()) {
        Some("Invalid name")
    } else {
        None
    }
}

/// `btf_func_proto_check_meta`, and `btf_func_proto_check`'s argument names.
fn func_proto(t: &RawType<'_>) -> Option<&'static str> {
    let bad_arg_name = |&off: &u32| off != 0 && !is_identifier(name_at(t.strings, off));
    if t.name_off != 0 {
        Some("Invalid name")
    } else if t.kflag() {
        Some("Invalid btf_info kind_flag")
    } else if t.record_names.iter().any(bad_arg_name) {
        Some("Invalid arg")
    } else {
        None
    }
}

/// `btf_func_check_meta`. Extern is sent as global (the writer), as libbpf's fix-up does.
fn func(t: &RawType<'_>, linkage: Linkage) -> Option<&'static str> {
    if !is_identifier(t.name()) {
        Some("Invalid name")
    } else if matches!(linkage, Linkage::Unknown(_)) {
        Some("Invalid func linkage")
    } else if t.kflag() {
        Some("Invalid btf_info kind_flag")
    } else {
        None
    }
}

/// `btf_var_check_meta`.
fn var(t: &RawType<'_>, ty: TypeId, linkage: Linkage) -> Option<&'static str> {
    if t.vlen() != 0 {
        Some("vlen != 0")
    } else if t.kflag() {
        Some("Invalid btf_info kind_flag")
    } else if !is_identifier(t.name()) {
        Some("Invalid name")
    } else if ty == 0 || !is_type_id(ty) {
        Some("Invalid type_id")
    } else if matches!(linkage, Linkage::Unknown(_)) {
        Some("Linkage not supported")
    } else {
        None
    }
}

/// `btf_datasec_check_meta` over every DATASEC of `btf` (the blob as the kernel gets it);
/// its entries' variables are `kernel_resolve`'s.
pub(crate) fn datasec_refusal(btf: &Btf) -> Option<String> {
    btf.types
        .iter()
        .enumerate()
        .find_map(|(id, t)| match &t.kind {
            BtfKind::DataSec { size, vars } => {
                datasec(&t.name, *size, vars).map(|problem| format!("[{id}] {problem}"))
            }
            _ => None,
        })
}

/// `btf_func_check`: a FUNC's type is a FUNC_PROTO whose arguments all have names (the
/// last, variadic `...`, has neither name nor type).
pub(crate) fn func_refusal(btf: &Btf) -> Option<String> {
    btf.types.iter().enumerate().find_map(|(id, t)| {
        let BtfKind::Func { proto, .. } = &t.kind else {
            return None;
        };
        let problem = match btf.get(*proto).map(|p| &p.kind) {
            Some(BtfKind::FuncProto { params, .. }) => params
                .iter()
                .position(|p| p.name.is_empty() && p.ty != 0)
                .map(|i| format!("Invalid arg#{}", i + 1)),
            _ => Some("Invalid type_id".to_owned()),
        };
        problem.map(|p| format!("[{id}] {p}"))
    })
}

/// `btf_struct_resolve`'s member checks for every STRUCT and UNION: a member that is not a
/// bitfield fits the struct from its offset, and starts on a byte unless it is an INT.
pub(crate) fn member_refusal(btf: &Btf) -> Option<String> {
    btf.types.iter().enumerate().find_map(|(id, t)| {
        let (BtfKind::Struct { size, members } | BtfKind::Union { size, members }) = &t.kind else {
            return None;
        };
        members
            .iter()
            .filter(|m| m.bitfield_size == 0)
            .find_map(|m| member_problem(btf, *size, m))
            .map(|p| format!("[{id}] {p}"))
    })
}

fn member_problem(btf: &Btf, struct_size: u32, m: &Member) -> Option<&'static str> {
    let room = struct_size.checked_sub(m.bit_offset / 8)?;
    // An INT member (`btf_int_check_member`) may start inside a byte; any other needs a
    // whole byte.
    if let Some((bit_offset, bits)) = int_bits(btf, m.ty) {
        let copied = m.bit_offset % 8 + bit_offset + bits;
        return if copied > 128 || copied.div_ceil(8) > room {
            Some("Member exceeds struct_size")
        } else {
            None
        };
    }
    if !m.bit_offset.is_multiple_of(8) {
        return Some("Member is not byte aligned");
    }
    match btf.size_of(m.ty) {
        None => Some("Invalid member"),
        Some(size) if size > room => Some("Member exceeds struct_size"),
        Some(_) => None,
    }
}

/// The bit offset and width of the INT `id` is (through modifiers and typedefs), if it is one.
fn int_bits(btf: &Btf, mut id: TypeId) -> Option<(u32, u32)> {
    for _ in 0..32 {
        match &btf.get(id)?.kind {
            BtfKind::Int {
                bit_offset, bits, ..
            } => return Some((u32::from(*bit_offset), u32::from(*bits))),
            BtfKind::Typedef { ty }
            | BtfKind::Volatile { ty }
            | BtfKind::Const { ty }
            | BtfKind::Restrict { ty }
            | BtfKind::TypeTag { ty } => id = *ty,
            _ => return None,
        }
    }
    None
}

fn datasec(name: &str, size: u32, vars: &[VarSecInfo]) -> Option<&'static str> {
    if vars.is_empty() {
        return Some("vlen == 0");
    }
    if size == 0 {
        return Some("size == 0");
    }
    if !is_section_name(name) {
        return Some("Invalid name");
    }
    let mut covered = 0u64;
    for v in vars {
        if v.ty == 0 || !is_type_id(v.ty) {
            return Some("Invalid type_id");
        }
        if u64::from(v.offset) < covered {
            return Some("Invalid offset");
        }
        if v.size == 0 || u64::from(v.offset) + u64::from(v.size) > u64::from(size) {
            return Some("Invalid offset+size");
        }
        covered = u64::from(v.offset) + u64::from(v.size);
    }
    None
}

/// `btf_float_check_meta`.
fn float(t: &RawType<'_>, size: u32) -> Option<&'static str> {
    if t.vlen() != 0 {
        Some("vlen != 0")
    } else if t.kflag() {
        Some("Invalid btf_info kind_flag")
    } else if !matches!(size, 2 | 4 | 8 | 12 | 16) {
        Some("Invalid type_size")
    } else {
        None
    }
}

/// `btf_decl_tag_check_meta`.
fn decl_tag(t: &RawType<'_>, component_idx: i32) -> Option<&'static str> {
    if t.name().is_empty() {
        Some("Invalid value")
    } else if t.vlen() != 0 {
        Some("vlen != 0")
    } else if component_idx < -1 {
        Some("Invalid component_idx")
    } else {
        None
    }
}

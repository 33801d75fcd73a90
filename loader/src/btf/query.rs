//! Lookups loaders need on a parsed [`Btf`]: types by id or name, modifier stripping, sizes,
//! and a C-like type name for display (`struct ethhdr`, `__u32`, `char[16]`, `struct foo *`).
//!
//! Every walk along type references is depth-limited, so a malformed blob with a reference
//! cycle (`const` pointing at itself) gives `None`, never a hang.

use super::types::*;

/// How many reference hops a walk may take (libbpf's `MAX_RESOLVE_DEPTH`).
const MAX_DEPTH: usize = 32;
/// Pointer size on BPF (and on the 64-bit kernels BTF describes).
const PTR_SIZE: u32 = 8;

impl BtfKind {
    /// The `BTF_KIND_*` number.
    pub fn kind_number(&self) -> u32 {
        match self {
            BtfKind::Void => 0,
            BtfKind::Int { .. } => 1,
            BtfKind::Ptr { .. } => 2,
            BtfKind::Array { .. } => 3,
            BtfKind::Struct { .. } => 4,
            BtfKind::Union { .. } => 5,
            BtfKind::Enum { .. } => 6,
            BtfKind::Fwd { .. } => 7,
            BtfKind::Typedef { .. } => 8,
            BtfKind::Volatile { .. } => 9,
            BtfKind::Const { .. } => 10,
            BtfKind::Restrict { .. } => 11,
            BtfKind::Func { .. } => 12,
            BtfKind::FuncProto { .. } => 13,
            BtfKind::Var { .. } => 14,
            BtfKind::DataSec { .. } => 15,
            BtfKind::Float { .. } => 16,
            BtfKind::DeclTag { .. } => 17,
            BtfKind::TypeTag { .. } => 18,
            BtfKind::Enum64 { .. } => 19,
        }
    }

    /// The kind's name as libbpf and bpftool print it (`struct`, `func_proto`, ...).
    pub fn kind_name(&self) -> &'static str {
        const NAMES: [&str; 20] = [
            "void",
            "int",
            "ptr",
            "array",
            "struct",
            "union",
            "enum",
            "fwd",
            "typedef",
            "volatile",
            "const",
            "restrict",
            "func",
            "func_proto",
            "var",
            "datasec",
            "float",
            "decl_tag",
            "type_tag",
            "enum64",
        ];
        NAMES[self.kind_number() as usize]
    }

    pub fn is_composite(&self) -> bool {
        matches!(self, BtfKind::Struct { .. } | BtfKind::Union { .. })
    }

    pub fn is_any_enum(&self) -> bool {
        matches!(self, BtfKind::Enum { .. } | BtfKind::Enum64 { .. })
    }

    /// const, volatile, restrict and type_tag: qualifiers that do not change the layout.
    pub fn is_modifier(&self) -> bool {
        matches!(
            self,
            BtfKind::Const { .. }
                | BtfKind::Volatile { .. }
                | BtfKind::Restrict { .. }
                | BtfKind::TypeTag { .. }
        )
    }

    /// Struct/union members (empty for other kinds).
    pub fn members(&self) -> &[Member] {
        match self {
            BtfKind::Struct { members, .. } | BtfKind::Union { members, .. } => members,
            _ => &[],
        }
    }

    /// Enumerators of an enum or enum64 (empty for other kinds).
    pub fn enum_values(&self) -> &[EnumValue] {
        match self {
            BtfKind::Enum { values, .. } | BtfKind::Enum64 { values, .. } => values,
            _ => &[],
        }
    }

    /// The type a modifier, typedef, pointer, var or tag refers to.
    pub fn referenced(&self) -> Option<TypeId> {
        match self {
            BtfKind::Ptr { ty }
            | BtfKind::Typedef { ty }
            | BtfKind::Volatile { ty }
            | BtfKind::Const { ty }
            | BtfKind::Restrict { ty }
            | BtfKind::TypeTag { ty }
            | BtfKind::Var { ty, .. }
            | BtfKind::DeclTag { ty, .. } => Some(*ty),
            _ => None,
        }
    }

    /// The `size` a sized kind records (int, enum, struct, union, datasec, float).
    pub fn declared_size(&self) -> Option<u32> {
        match self {
            BtfKind::Int { size, .. }
            | BtfKind::Struct { size, .. }
            | BtfKind::Union { size, .. }
            | BtfKind::Enum { size, .. }
            | BtfKind::Enum64 { size, .. }
            | BtfKind::DataSec { size, .. }
            | BtfKind::Float { size } => Some(*size),
            _ => None,
        }
    }
}

impl Btf {
    /// Why `BPF_BTF_LOAD` in 6.18 refuses this BTF as libbpf 1.7 loads it (after its fix-ups,
    /// as [`Btf::to_kernel_bytes`] writes it), as "[id] rule"; `None` when it is accepted as
    /// far as bpfemu checks (`btf_check_all_metas`' per-type rules, DATASEC entries, FUNC
    /// and FUNC_PROTO arguments, struct members, arrays).
    pub fn kernel_refusal(&self) -> Option<String> {
        if let Some(raw) = &self.raw_refusal {
            return Some(raw.clone());
        }
        let sent = Btf::parse(&self.to_kernel_bytes().bytes).ok()?;
        super::kernel_meta::datasec_refusal(&sent)
            .or_else(|| super::kernel_resolve::resolve_refusal(&sent))
            .or_else(|| super::kernel_meta::func_refusal(&sent))
            .or_else(|| super::kernel_meta::member_refusal(&sent))
    }

    /// The type with this id (`Some(void)` for 0), `None` when it does not exist.
    pub fn get(&self, id: TypeId) -> Option<&BtfType> {
        self.types.get(id as usize)
    }

    /// The type's name (empty when anonymous), `None` when it does not exist.
    pub fn name_of(&self, id: TypeId) -> Option<&str> {
        self.get(id).map(|t| t.name.as_str())
    }

    /// Number of types including `void`; the last id is `type_count() - 1`.
    pub fn type_count(&self) -> usize {
        self.types.len()
    }

    /// Follows const/volatile/restrict/type_tag and typedefs to the underlying type's id.
    /// `None` when an id does not exist or the chain loops.
    pub fn skip_mods_and_typedefs(&self, mut id: TypeId) -> Option<TypeId> {
        for _ in 0..=self.types.len().min(1 << 16) {
            let kind = &self.get(id)?.kind;
            if !(kind.is_modifier() || matches!(kind, BtfKind::Typedef { .. })) {
                return Some(id);
            }
            id = kind.referenced()?;
        }
        None
    }

    /// The size in bytes of an object of this type, as libbpf's `btf__resolve_size` computes
    /// it: pointers are 8, arrays multiply (overflow past `u32` is `None`), modifiers, typedefs,
    /// vars and tags are looked through. `None` for void, forward declarations, functions, and
    /// chains deeper than 32.
    pub fn size_of(&self, mut id: TypeId) -> Option<u32> {
        let mut nelems: u32 = 1;
        for _ in 0..MAX_DEPTH {
            let kind = &self.get(id)?.kind;
            let size = match kind {
                BtfKind::Void | BtfKind::Fwd { .. } => return None,
                BtfKind::Ptr { .. } => PTR_SIZE,
                BtfKind::Array { elem, len, .. } => {
                    nelems = nelems.checked_mul(*len)?;
                    id = *elem;
                    continue;
                }
                _ => match kind.declared_size() {
                    Some(size) => size,
                    None => {
                        id = kind.referenced()?;
                        continue;
                    }
                },
            };
            return nelems.checked_mul(size);
        }
        None
    }

    /// The first type (lowest id) with this exact name whose kind satisfies `pred`.
    pub fn find_by_name_kind(&self, name: &str, pred: impl Fn(&BtfKind) -> bool) -> Option<TypeId> {
        self.types
            .iter()
            .position(|t| t.name == name && pred(&t.kind))
            .map(|i| i as TypeId)
    }

    /// A C-like name for display: `struct ethhdr`, `__u32`, `char[16]`, `struct foo *`,
    /// `const char *`, `int (*)(void *)`. Unknown ids print as `<bad type N>`.
    pub fn type_name(&self, id: TypeId) -> String {
        let mut out = String::new();
        self.write_name(id, &mut out, 0);
        out
    }

    fn write_name(&self, id: TypeId, out: &mut String, depth: usize) {
        let Some(ty) = self.get(id).filter(|_| depth < MAX_DEPTH) else {
            out.push_str(&format!("<bad type {id}>"));
            return;
        };
        let named = |prefix: &str| {
            if ty.name.is_empty() {
                format!("{prefix} {{...}}")
            } else {
                format!("{prefix} {}", ty.name)
            }
        };
        match &ty.kind {
            BtfKind::Void => out.push_str("void"),
            BtfKind::Struct { .. } => out.push_str(&named("struct")),
            BtfKind::Union { .. } => out.push_str(&named("union")),
            BtfKind::Enum { .. } | BtfKind::Enum64 { .. } => out.push_str(&named("enum")),
            BtfKind::Fwd { union } => out.push_str(&named(if *union { "union" } else { "struct" })),
            BtfKind::Ptr { ty: inner } => self.write_pointer(*inner, out, depth),
            BtfKind::Array { .. } => self.write_array(id, out, depth),
            BtfKind::Const { ty: inner } => self.write_qualified("const", *inner, out, depth),
            BtfKind::Volatile { ty: inner } => self.write_qualified("volatile", *inner, out, depth),
            BtfKind::Restrict { ty: inner } => self.write_qualified("restrict", *inner, out, depth),
            BtfKind::TypeTag { ty: inner } => {
                out.push_str(&format!("__attribute__((btf_type_tag(\"{}\"))) ", ty.name));
                self.write_name(*inner, out, depth + 1);
            }
            BtfKind::FuncProto { .. } => self.write_proto(id, "", out, depth),
            _ => out.push_str(&ty.name),
        }
    }

    fn write_qualified(&self, qual: &str, inner: TypeId, out: &mut String, depth: usize) {
        out.push_str(qual);
        out.push(' ');
        self.write_name(inner, out, depth + 1);
    }

    fn write_pointer(&self, inner: TypeId, out: &mut String, depth: usize) {
        if matches!(
            self.get(inner).map(|t| &t.kind),
            Some(BtfKind::FuncProto { .. })
        ) {
            return self.write_proto(inner, "(*)", out, depth);
        }
        self.write_name(inner, out, depth + 1);
        if !out.ends_with('*') {
            out.push(' ');
        }
        out.push('*');
    }

    /// `int[2][3]`: the innermost element type, then every dimension outermost first.
    fn write_array(&self, mut id: TypeId, out: &mut String, depth: usize) {
        let mut dims = String::new();
        for _ in 0..MAX_DEPTH {
            match self.get(id).map(|t| &t.kind) {
                Some(BtfKind::Array { elem, len, .. }) => {
                    dims.push_str(&format!("[{len}]"));
                    id = *elem;
                }
                _ => break,
            }
        }
        self.write_name(id, out, depth + 1);
        out.push_str(&dims);
    }

    /// `ret (<declarator>)(params)`; the declarator is `(*)` for function pointers.
    fn write_proto(&self, id: TypeId, declarator: &str, out: &mut String, depth: usize) {
        let Some(BtfKind::FuncProto { ret, params }) = self.get(id).map(|t| &t.kind) else {
            return;
        };
        self.write_name(*ret, out, depth + 1);
        out.push_str(&format!(" {declarator}("));
        if params.is_empty() {
            out.push_str("void");
        }
        for (i, p) in params.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            if p.ty == 0 {
                out.push_str("...");
            } else {
                self.write_name(p.ty, out, depth + 1);
            }
        }
        out.push(')');
    }
}

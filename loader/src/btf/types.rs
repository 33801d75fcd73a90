//! The BTF data model: every kind Linux 6.18 defines, with names resolved and member offsets
//! normalised (the `kind_flag` encoding of bitfields is decoded by the parser).
//!
//! Type ids index [`Btf::types`]; id 0 is `void`. Names are empty for anonymous types.

/// A BTF type id; 0 is `void`.
pub type TypeId = u32;

/// One type: its name (empty when anonymous) and what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BtfType {
    pub name: String,
    pub kind: BtfKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BtfKind {
    /// Type id 0 only.
    Void,
    Int {
        size: u32,
        encoding: IntEncoding,
        bit_offset: u8,
        bits: u8,
    },
    Ptr {
        ty: TypeId,
    },
    Array {
        elem: TypeId,
        index: TypeId,
        len: u32,
    },
    Struct {
        size: u32,
        members: Vec<Member>,
    },
    Union {
        size: u32,
        members: Vec<Member>,
    },
    /// BTF_KIND_ENUM: values fit 32 bits (stored widened).
    Enum {
        size: u32,
        signed: bool,
        values: Vec<EnumValue>,
    },
    /// BTF_KIND_ENUM64.
    Enum64 {
        size: u32,
        signed: bool,
        values: Vec<EnumValue>,
    },
    Fwd {
        union: bool,
    },
    Typedef {
        ty: TypeId,
    },
    Volatile {
        ty: TypeId,
    },
    Const {
        ty: TypeId,
    },
    Restrict {
        ty: TypeId,
    },
    Func {
        proto: TypeId,
        linkage: Linkage,
    },
    FuncProto {
        ret: TypeId,
        params: Vec<Param>,
    },
    Var {
        ty: TypeId,
        linkage: Linkage,
    },
    DataSec {
        size: u32,
        vars: Vec<VarSecInfo>,
    },
    Float {
        size: u32,
    },
    /// A tag on a type, or on one of its members/params (`component_idx` >= 0).
    DeclTag {
        ty: TypeId,
        component_idx: i32,
    },
    TypeTag {
        ty: TypeId,
    },
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntEncoding {
    pub signed: bool,
    pub char: bool,
    pub bool: bool,
}

/// A struct or union member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub ty: TypeId,
    /// Offset from the start of the aggregate, in bits.
    pub bit_offset: u32,
    /// Bitfield width in bits; 0 when the member is not a bitfield.
    pub bitfield_size: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnumValue {
    pub name: String,
    /// The value's bits; read as signed when the enum is signed.
    pub value: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Empty for unnamed parameters (and for the `...` of a variadic prototype).
    pub name: String,
    /// 0 (void) for the `...` of a variadic prototype.
    pub ty: TypeId,
}

/// Linkage of a FUNC (static, global, extern) or VAR (static, global-allocated, extern).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Linkage {
    Static,
    Global,
    Extern,
    /// A value BTF does not define. libbpf reads it and sends it on; the kernel refuses the
    /// blob ("Invalid func linkage", "Linkage not supported").
    Unknown(u32),
}

/// One variable of a DATASEC: its VAR type id, offset and size in the section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VarSecInfo {
    pub ty: TypeId,
    pub offset: u32,
    pub size: u32,
}

/// A parsed BTF blob.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Btf {
    /// Index = type id; `types[0]` is `void`.
    pub types: Vec<BtfType>,
    /// The raw string section. BTF.ext records name things by offsets into it, so it is kept
    /// after parsing; empty for a `Btf` built by hand.
    pub strings: Vec<u8>,
    /// The first type of the parsed blob that `BPF_BTF_LOAD` refuses (DATASECs aside: see
    /// [`Btf::kernel_refusal`]), as "[id] rule".
    pub raw_refusal: Option<String>,
}

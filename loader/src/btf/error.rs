//! Errors from parsing BTF and BTF.ext blobs.
//!
//! Every variant names the byte offset in the blob it was found at (counted from the blob's first
//! byte, the header's magic) and, for problems inside the type section, the type id being parsed,
//! so a user can find the culprit with `xxd` or `bpftool btf dump`.

use super::types::TypeId;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BtfError {
    /// The blob ends before a structure that must be there.
    #[error("{blob}: truncated {what} at byte {offset}: need {need} bytes, {have} left")]
    Truncated {
        blob: &'static str,
        what: &'static str,
        offset: usize,
        need: usize,
        have: usize,
    },
    #[error("{blob}: bad magic {magic:#06x} at byte 0 (expected 0xeb9f)")]
    BadMagic { blob: &'static str, magic: u16 },
    #[error("{blob}: unsupported version {version} at byte 2 (only version 1 exists)")]
    BadVersion { blob: &'static str, version: u8 },
    /// A header field that is inconsistent (a section outside the blob, misaligned, ...).
    #[error("{blob}: bad header at byte {offset}: {what}")]
    BadHeader {
        blob: &'static str,
        offset: usize,
        what: String,
    },
    #[error("BTF type [{type_id}] at byte {offset}: unknown kind {kind}")]
    UnknownKind {
        type_id: TypeId,
        offset: usize,
        kind: u32,
    },
    /// A name offset that does not point into the string section.
    #[error(
        "{blob}: {context} at byte {offset}: string offset {str_off} out of range (string section is {str_len} bytes)"
    )]
    StringOffset {
        blob: &'static str,
        context: String,
        offset: usize,
        str_off: u32,
        str_len: usize,
    },
    /// A type whose fields make no sense for its kind (bad linkage, int size, ...).
    #[error("BTF type [{type_id}] at byte {offset}: {what}")]
    BadType {
        type_id: TypeId,
        offset: usize,
        what: String,
    },
    /// A type refers (as its target, member, element, parameter, ...) to an id that does not
    /// exist. Found after all types are parsed, since BTF allows forward references.
    #[error(
        "BTF type [{type_id}] at byte {offset}: {role} refers to type [{bad_id}], but the last type is [{last_id}]"
    )]
    BadTypeRef {
        type_id: TypeId,
        offset: usize,
        role: &'static str,
        bad_id: TypeId,
        last_id: TypeId,
    },
    /// A FUNC whose type is not a FUNC_PROTO (libbpf's parser refuses it too).
    #[error(
        "BTF type [{type_id}] at byte {offset}: FUNC refers to type [{proto}], which is not a FUNC_PROTO"
    )]
    FuncNotProto {
        type_id: TypeId,
        offset: usize,
        proto: TypeId,
    },
    /// A BTF.ext record or subsection that is malformed.
    #[error(".BTF.ext {subsection} at byte {offset}: {what}")]
    BadExt {
        subsection: &'static str,
        offset: usize,
        what: String,
    },
}

//! CO-RE ("compile once, run everywhere") relocation, with libbpf's semantics.
//!
//! clang records, for each instruction that depends on a kernel type's layout, a relocation:
//! the local type (as the program declared it), an access string (`0:1:2`: element 0, member 1,
//! member 2) and what is wanted (a field's offset, size, existence, signedness, shifts; a
//! type's existence, size, id; an enumerator's existence or value). Relocation finds the
//! same-named types in the target BTF (the running kernel's, usually), follows the same access
//! by member *names*, and rewrites the instruction with the target's value.
//!
//! Like libbpf: candidates are target types of a compatible kind whose names agree once any
//! `___flavor` suffix is stripped; when several match, they must all give the same result;
//! when none matches, existence checks give 0 and other relocations *poison* their instruction
//! (a call to helper `0xbad2310`), which only fails if the verifier finds it reachable.
//! Candidate lists are cached per local type and pruned to the types that matched, across the
//! relocations of one [`CoreRelocator`], so share one relocator across an object's sections to
//! reproduce libbpf exactly.
//!
//! ```no_run
//! # use bpfemu_loader::btf::{Btf, BtfExt};
//! # use bpfemu_loader::core_relo::relocate;
//! # fn demo(local: &Btf, ext: &BtfExt, insns: &mut [bpfemu_isa::RawInsn]) -> Result<(), Box<dyn std::error::Error>> {
//! let vmlinux = Btf::parse(&std::fs::read("/sys/kernel/btf/vmlinux")?)?;
//! for sec in ext.core_relos.iter().filter(|s| s.section == "xdp") {
//!     relocate(insns, &sec.records, local, &vmlinux)?;
//! }
//! # Ok(()) }
//! ```

mod calc;
pub(crate) mod compat;
mod patch;
mod spec;

use crate::btf::{Btf, CoreRelo, CoreReloKind, TypeId};
use bpfemu_isa::RawInsn;
use compat::{essential_name, kinds_compat};
use spec::Spec;
use std::collections::HashMap;

pub use patch::POISON_HELPER_ID;

/// Whether `insn` is the call a failed relocation leaves (see [`POISON_HELPER_ID`]).
pub fn is_poisoned(insn: &RawInsn) -> bool {
    insn.code == (bpfemu_isa::opcode::BPF_JMP | bpfemu_isa::opcode::BPF_CALL)
        && insn.src == 0
        && insn.imm == POISON_HELPER_ID
}

/// A relocation that could not be applied: where, for which type and access, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "CO-RE relocation #{relo_idx} <{}> at insn #{insn} for [{type_id}] {type_name} access '{access}': {reason}",
    kind.libbpf_name()
)]
pub struct CoreError {
    /// Index of the relocation in the slice given to [`relocate`].
    pub relo_idx: usize,
    /// The instruction, counted from the start of its ELF section.
    pub insn: u32,
    pub kind: CoreReloKind,
    pub type_id: TypeId,
    /// The local type as C would name it (`struct sk_buff___local`).
    pub type_name: String,
    pub access: String,
    pub reason: CoreFailure,
}

/// Why a relocation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CoreFailure {
    #[error("instruction index out of range (the section has {len} instructions)")]
    InsnOutOfRange { len: usize },
    #[error("type [{0}] does not exist")]
    NoSuchType(TypeId),
    #[error("the size of type [{0}] cannot be determined")]
    NoSize(TypeId),
    #[error("bad access string: {0}")]
    BadAccess(String),
    #[error("access nests deeper than 64 levels")]
    TooDeep,
    #[error("relocations against anonymous types are not supported")]
    AnonymousType,
    #[error("relocation kind not applicable here")]
    Unsupported,
    #[error("this relocation kind cannot be applied to an array element access")]
    ArrayAccess,
    #[error("bitfield's type has no size")]
    BadBitfield,
    #[error("bitfield cannot be read with a single 64-bit load")]
    BitfieldTooWide,
    #[error("field offset ambiguity: candidates resolve to bit offsets {first} and {other}")]
    FieldOffsetAmbiguity { first: u32, other: u32 },
    #[error("relocation decision ambiguity: candidates give {first} and {other}")]
    DecisionAmbiguity { first: String, other: String },
    #[error(
        "unexpected {class} value in the instruction: got {got}, expected {expected} (-> {new})"
    )]
    UnexpectedValue {
        class: &'static str,
        got: i64,
        expected: u64,
        new: u64,
    },
    #[error("new offset {0} does not fit an instruction's 16-bit offset")]
    OffsetTooBig(u64),
    #[error("load/store size is {got} bytes, expected {expected}")]
    UnexpectedMemSize { got: u32, expected: u32 },
    #[error("new load/store size of {0} bytes is not 1, 2, 4 or 8")]
    InvalidMemSize(u32),
    #[error("ld_imm64 has an unexpected form")]
    BadLdImm64,
    #[error("instruction with opcode {code:#04x} cannot be relocated")]
    UnsupportedInsn { code: u8 },
}

/// The computed outcome of one relocation, before it is written into the instruction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoreReloResult {
    /// The value computed against the local BTF, which the instruction should hold now.
    pub orig_val: u64,
    /// The value against the target BTF, which it will hold.
    pub new_val: u64,
    /// No target: the instruction becomes a call to [`POISON_HELPER_ID`].
    pub poison: bool,
    /// Whether the instruction must hold `orig_val` before patching.
    pub validate: bool,
    /// The field changed width in a way a narrower/wider load cannot express.
    pub fail_memsz_adjust: bool,
    /// Load/store widths (bytes) of the field locally and in the target; 0 when not a field.
    pub orig_sz: u32,
    pub new_sz: u32,
    pub orig_type_id: TypeId,
    pub new_type_id: TypeId,
}

/// The relocation as libbpf names it in its messages (`<byte_off> [7] struct iphdr.saddr (0:9
/// @ offset 12)`), read against the object's own BTF; `None` when its access string does not
/// parse there (libbpf then leaves its log as the verifier wrote it).
pub fn describe(local: &Btf, relo: &CoreRelo) -> Option<String> {
    spec::parse_spec(local, relo)
        .ok()
        .map(|spec| spec.describe(relo.kind))
}

/// Relocates one ELF section's instructions. `relo.insn` indexes `insns`.
pub fn relocate(
    insns: &mut [RawInsn],
    relos: &[CoreRelo],
    local: &Btf,
    target: &Btf,
) -> Result<(), CoreError> {
    CoreRelocator::new(local, target).relocate(insns, relos)
}

/// Applies relocations of one object against one target, keeping libbpf's per-type candidate
/// cache between calls.
pub struct CoreRelocator<'a> {
    local: &'a Btf,
    target: &'a Btf,
    /// Local root type id -> target candidate ids still in the running.
    candidates: HashMap<TypeId, Vec<TypeId>>,
}

impl<'a> CoreRelocator<'a> {
    pub fn new(local: &'a Btf, target: &'a Btf) -> Self {
        CoreRelocator {
            local,
            target,
            candidates: HashMap::new(),
        }
    }

    /// Resolves and patches every relocation of one section, in order.
    pub fn relocate(&mut self, insns: &mut [RawInsn], relos: &[CoreRelo]) -> Result<(), CoreError> {
        for (i, relo) in relos.iter().enumerate() {
            let idx = relo.insn as usize;
            if idx >= insns.len() {
                return Err(self.error(i, relo, CoreFailure::InsnOutOfRange { len: insns.len() }));
            }
            let res = self.resolve(i, relo)?;
            patch::patch_insn(insns, idx, &res).map_err(|f| self.error(i, relo, f))?;
        }
        Ok(())
    }

    /// Computes what relocation `relo` (number `relo_idx`, for messages) resolves to.
    pub fn resolve(
        &mut self,
        relo_idx: usize,
        relo: &CoreRelo,
    ) -> Result<CoreReloResult, CoreError> {
        self.resolve_inner(relo)
            .map_err(|f| self.error(relo_idx, relo, f))
    }

    fn error(&self, relo_idx: usize, relo: &CoreRelo, reason: CoreFailure) -> CoreError {
        CoreError {
            relo_idx,
            insn: relo.insn,
            kind: relo.kind,
            type_id: relo.type_id,
            type_name: self.local.type_name(relo.type_id),
            access: relo.access.clone(),
            reason,
        }
    }

    fn resolve_inner(&mut self, relo: &CoreRelo) -> Result<CoreReloResult, CoreFailure> {
        let local_type = self
            .local
            .get(relo.type_id)
            .ok_or(CoreFailure::NoSuchType(relo.type_id))?;
        let local_spec = spec::parse_spec(self.local, relo)?;
        if relo.kind == CoreReloKind::TypeIdLocal {
            // The local id needs no target; it may change when objects are linked, so the
            // instruction's current value is not checked.
            let id = u64::from(relo.type_id);
            return Ok(CoreReloResult {
                orig_val: id,
                new_val: id,
                ..CoreReloResult::default()
            });
        }
        if local_type.name.is_empty() {
            return Err(CoreFailure::AnonymousType);
        }
        let cands = self.candidates_for(relo.type_id);
        let (matched, result) = match_candidates(&local_spec, relo.kind, self.target, &cands)?;
        if !matched.is_empty() {
            self.candidates.insert(relo.type_id, matched);
        }
        match result {
            Some(res) => Ok(res),
            None => calc::calc_relo(relo.kind, &local_spec, None),
        }
    }

    /// Target types whose kind is compatible with the local type's and whose essential name
    /// equals its essential name; computed once per local type, then only pruned.
    fn candidates_for(&mut self, local_id: TypeId) -> Vec<TypeId> {
        let (local, target) = (self.local, self.target);
        self.candidates
            .entry(local_id)
            .or_insert_with(|| find_candidates(local, local_id, target))
            .clone()
    }
}

/// Scans the whole target BTF (as libbpf does, rather than indexing names).
pub(crate) fn find_candidates(local: &Btf, local_id: TypeId, target: &Btf) -> Vec<TypeId> {
    let Some(local_type) = local.get(local_id) else {
        return Vec::new();
    };
    let want = essential_name(&local_type.name);
    target
        .types
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, t)| kinds_compat(&t.kind, &local_type.kind) && !t.name.is_empty())
        .filter(|(_, t)| essential_name(&t.name) == want)
        .map(|(id, _)| id as TypeId)
        .collect()
}

/// Matches the local spec against each candidate. Returns the candidates that matched and,
/// when any did, the (agreed) result.
fn match_candidates(
    local_spec: &Spec<'_>,
    kind: CoreReloKind,
    target: &Btf,
    cands: &[TypeId],
) -> Result<(Vec<TypeId>, Option<CoreReloResult>), CoreFailure> {
    let mut matched = Vec::new();
    let mut first: Option<(CoreReloResult, u32)> = None;
    for &cand in cands {
        let Some(cand_spec) = spec::spec_match(local_spec, kind, target, cand)? else {
            continue;
        };
        let res = calc::calc_relo(kind, local_spec, Some(&cand_spec))?;
        if let Some((prev, prev_bits)) = &first {
            check_agreement(prev, *prev_bits, &res, cand_spec.bit_offset)?;
        } else {
            first = Some((res, cand_spec.bit_offset));
        }
        matched.push(cand);
    }
    Ok((matched, first.map(|(res, _)| res)))
}

/// All matching candidates must resolve to the same offset and the same decision.
fn check_agreement(
    prev: &CoreReloResult,
    prev_bits: u32,
    res: &CoreReloResult,
    bits: u32,
) -> Result<(), CoreFailure> {
    if bits != prev_bits {
        return Err(CoreFailure::FieldOffsetAmbiguity {
            first: prev_bits,
            other: bits,
        });
    }
    if res.poison != prev.poison || res.new_val != prev.new_val {
        let show = |r: &CoreReloResult| {
            format!(
                "{} {}",
                if r.poison { "failure" } else { "success" },
                r.new_val
            )
        };
        return Err(CoreFailure::DecisionAmbiguity {
            first: show(prev),
            other: show(res),
        });
    }
    Ok(())
}

//! The kfuncs XDP programs may call in bpfemu, in one table ([`KFUNCS`]), by name.
//!
//! A kfunc call (`call` with `src_reg = BPF_PSEUDO_KFUNC_CALL`) names its function by BTF id in
//! the vmlinux BTF of the kernel the program was loaded into (the loader resolves a program's
//! `__ksym` externs to those ids, as libbpf does). The caller gives the names of those ids
//! ([`KfuncNames`], in [`XdpConfig::kfunc_names`](super::XdpConfig::kfunc_names));
//! [`KfuncResolver`] turns each id into a name once, when the program is prepared
//! ([`super::prepare`]), and the name into an implementation of this table; an id that names
//! no function, or a function bpfemu does not implement, is refused there, by name, never in
//! the middle of a replay.
//!
//! The numeric open-coded iterator of `kernel/bpf/bpf_iter.c` (what libbpf's `bpf_for` and
//! `bpf_repeat` use): `struct bpf_iter_num` is 8 bytes on the program's stack, `{ int cur;
//! int end; }`, where `cur` is the value last handed out and `end` is exclusive.
//! - `int bpf_iter_num_new(it, int start, int end)`: `start > end` clears both fields and
//!   answers -EINVAL; a range wider than `BPF_MAX_LOOPS` (computed in 64 bits, so
//!   `INT_MIN..INT_MAX` does not overflow) clears both and answers -E2BIG; otherwise `cur =
//!   start - 1` (wrapping in 32 bits) and `end = end`, and it answers 0.
//! - `int *bpf_iter_num_next(it)`: when `cur + 1` (computed in 32 bits, wrapping: the kernel
//!   builds with `-fno-strict-overflow`), widened to 64 bits, is at least `end`, both fields
//!   are cleared and it answers NULL; otherwise `cur` is incremented and it answers `&cur`, the
//!   iterator's own address.
//! - `void bpf_iter_num_destroy(it)`: clears both fields.
//!
//! An `int` result is r0 as the x86-64 kernel leaves it: zero-extended from 32 bits (-EINVAL
//! is `0xffffffea`), which `tests/iter_num_vs_kernel.rs` checks register for register. Every
//! access to the iterator goes through the run's [`Memory`], so checked runs validate it as
//! they validate a helper's pointer, and trusted runs too (kfuncs never touch host memory
//! directly).
//!
//! Adding a kfunc: its function here (same signature as the others), one [`KFUNCS`] entry
//! with its BTF name and its footprint for taint tracking; the engines need nothing more.

use super::helpers::XdpEnv;
use crate::helpers::HelperError;
use crate::interp::BPF_MAX_LOOPS;
use crate::memory::Memory;
use crate::taint::Footprint;
use std::collections::BTreeMap;

/// A kfunc: the run's environment, r1-r5, the memory; the value for r0.
pub type KfuncFn = fn(&mut XdpEnv<'_>, [u64; 5], &mut Memory) -> Result<u64, HelperError>;

/// One implemented kfunc.
pub struct KfuncDef {
    /// Its name in vmlinux BTF.
    pub name: &'static str,
    pub f: KfuncFn,
    /// What a call reads and writes, for taint tracking.
    pub footprint: fn([u64; 5]) -> Footprint,
}

/// Every kfunc bpfemu implements for XDP programs.
pub const KFUNCS: &[KfuncDef] = &[
    KfuncDef {
        name: "bpf_iter_num_new",
        f: iter_num_new,
        footprint: writes_iterator,
    },
    KfuncDef {
        name: "bpf_iter_num_next",
        f: iter_num_next,
        footprint: reads_and_writes_iterator,
    },
    KfuncDef {
        name: "bpf_iter_num_destroy",
        f: iter_num_destroy,
        footprint: writes_iterator,
    },
];

/// The kfunc named `name`, if bpfemu implements it.
pub fn lookup(name: &str) -> Option<&'static KfuncDef> {
    KFUNCS.iter().find(|k| k.name == name)
}

/// A kfunc a program calls, resolved: its BTF id and its implementation.
#[derive(Clone, Copy)]
pub struct ResolvedKfunc {
    pub btf_id: i32,
    pub def: &'static KfuncDef,
}

impl std::fmt::Debug for ResolvedKfunc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (btf id {})", self.def.name, self.btf_id)
    }
}

/// The kfuncs of a program set: found by BTF id at each call (a handful, searched in order).
pub fn find(kfuncs: &[ResolvedKfunc], btf_id: i32) -> Option<&'static KfuncDef> {
    kfuncs.iter().find(|k| k.btf_id == btf_id).map(|k| k.def)
}

/// The names of the kfuncs a program set calls, by BTF id, as the kernel the programs were
/// loaded into names them: the caller reads that kernel's BTF (the root crate from
/// `bpfemu_loader::Object::kfunc_names`), so the runtime never reads BTF itself. `Err`: why the
/// kernel's BTF could not be read (the file and the error), which every kfunc call is refused
/// with. Ids missing from the map name no function of that BTF.
pub type KfuncNames = Result<BTreeMap<i32, String>, String>;

/// Why a kfunc id cannot be resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unresolved {
    /// The kernel's BTF cannot be read or parsed.
    NoBtf(String),
    /// The id is not a function of the BTF.
    NotAFunction,
    /// A function bpfemu does not implement (its name).
    NotImplemented(String),
    /// A module's BTF (`off` not 0): bpfemu knows vmlinux's kfuncs only.
    ModuleBtf,
}

/// Resolves the kfunc ids of a program set by the names the caller gave, and collects what
/// it resolved.
pub struct KfuncResolver<'n> {
    names: &'n KfuncNames,
    resolved: Vec<ResolvedKfunc>,
}

impl<'n> KfuncResolver<'n> {
    pub fn new(names: &'n KfuncNames) -> KfuncResolver<'n> {
        KfuncResolver {
            names,
            resolved: Vec::new(),
        }
    }

    /// The implementation of the kfunc `btf_id` of module BTF `off` (0: vmlinux).
    pub fn resolve(&mut self, btf_id: i32, off: i16) -> Result<&'static KfuncDef, Unresolved> {
        if off != 0 {
            return Err(Unresolved::ModuleBtf);
        }
        if let Some(def) = find(&self.resolved, btf_id) {
            return Ok(def);
        }
        let names = self
            .names
            .as_ref()
            .map_err(|e| Unresolved::NoBtf(e.clone()))?;
        let name = names.get(&btf_id).ok_or(Unresolved::NotAFunction)?;
        let def = lookup(name).ok_or_else(|| Unresolved::NotImplemented(name.clone()))?;
        self.resolved.push(ResolvedKfunc { btf_id, def });
        Ok(def)
    }

    /// The kfuncs resolved so far.
    pub fn into_resolved(self) -> Vec<ResolvedKfunc> {
        self.resolved
    }
}

/// `EINVAL`, `E2BIG` as the negative values kfuncs return.
const EINVAL: i64 = -22;
const E2BIG: i64 = -7;

/// The iterator's 8 bytes, `{ int cur; int end; }`, checked once as one access (a bad pointer
/// reads and writes nothing).
fn iterator(mem: &mut Memory, it: u64) -> Result<&mut [u8], HelperError> {
    Ok(mem.slice_mut(it, 8)?)
}

fn fields(slot: &[u8]) -> (i32, i32) {
    let word = |i: usize| i32::from_le_bytes(slot[i..i + 4].try_into().expect("4 bytes"));
    (word(0), word(4))
}

fn set_fields(slot: &mut [u8], cur: i32, end: i32) {
    slot[..4].copy_from_slice(&cur.to_le_bytes());
    slot[4..8].copy_from_slice(&end.to_le_bytes());
}

fn iter_num_new(_: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> Result<u64, HelperError> {
    let (start, end) = (a[1] as i32, a[2] as i32);
    let (cur, end, r0) = if start > end {
        (0, 0, EINVAL)
    } else if end as i64 - start as i64 > BPF_MAX_LOOPS as i64 {
        (0, 0, E2BIG)
    } else {
        (start.wrapping_sub(1), end, 0)
    };
    set_fields(iterator(mem, a[0])?, cur, end);
    // An `int` in r0 as the x86-64 kernel leaves it: the callee's `eax`, zero-extended into
    // `rax` (the verifier marks r0 a 32-bit value; nothing extends it).
    Ok(r0 as i32 as u32 as u64)
}

fn iter_num_next(_: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> Result<u64, HelperError> {
    let slot = iterator(mem, a[0])?;
    let (cur, end) = fields(slot);
    // `cur + 1` wraps in 32 bits before it is widened, as the kernel's C does.
    let next = cur.wrapping_add(1);
    if next as i64 >= end as i64 {
        set_fields(slot, 0, 0);
        return Ok(0);
    }
    set_fields(slot, next, end);
    Ok(a[0])
}

fn iter_num_destroy(_: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> Result<u64, HelperError> {
    set_fields(iterator(mem, a[0])?, 0, 0);
    Ok(0)
}

fn writes_iterator(a: [u64; 5]) -> Footprint {
    Footprint::Memory {
        reads: Vec::new(),
        writes: vec![(a[0], 8)],
    }
}

fn reads_and_writes_iterator(a: [u64; 5]) -> Footprint {
    Footprint::Memory {
        reads: vec![(a[0], 8)],
        writes: vec![(a[0], 8)],
    }
}

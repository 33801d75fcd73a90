//! Loads through pointers to kernel structures described by vmlinux BTF: a map pointer read as
//! the map's `struct bpf_array`, `struct bpf_htab`, ... (`check_ptr_to_map_access`, which root
//! may do) and the `ptr_` registers such reads hand out (`check_ptr_to_btf_access`). Each load
//! is resolved as `btf_struct_walk` does: the bytes read must lie in one scalar member (or an
//! array of scalars), or be exactly one pointer member, which gives a typed pointer.

use crate::Errno;
use crate::Reject;
use crate::env::Env;
use crate::state::RegState;
use crate::state::reg::{MEM_PERCPU, MEM_RCU, MEM_USER, PTR_UNTRUSTED};
use bpfemu_loader::btf::{Btf, BtfKind, TypeId};

/// What a walk to `off`..`off + size` found.
enum Walk {
    Scalar,
    /// A pointer member to a struct: its type id and the flags its type tag gives.
    Ptr {
        id: TypeId,
        flags: u32,
    },
    /// A pointer member to anything else: read-only untrusted memory.
    PtrUntrusted,
    /// A nested struct starting exactly at `off`: the walk goes on inside it at offset 0.
    Struct(TypeId),
}

/// The result of a whole access: the loaded register.
pub enum Loaded {
    Scalar,
    BtfId { id: TypeId, flags: u32 },
    UntrustedMem,
}

/// XDP's `btf_struct_access` for writes, netfilter's `nf_conntrack_btf_struct_access`: a
/// connection's `mark` is the one kernel field an XDP program may write.
fn nf_conn_write(
    env: &mut Env<'_>,
    btf: &Btf,
    tname: &str,
    off: i32,
    size: i32,
) -> Result<(), Reject> {
    if tname != "nf_conn" && tname != "nf_conn___init" {
        return Err(env.reject(Errno::Eacces, "only read is supported"));
    }
    let mark = btf
        .find_by_name_kind("nf_conn", |k| matches!(k, BtfKind::Struct { .. }))
        .and_then(|id| match &btf.get(id)?.kind {
            BtfKind::Struct { members, .. } => members.iter().find(|m| m.name == "mark").cloned(),
            _ => None,
        })
        .and_then(|m| Some(((m.bit_offset / 8) as i32, btf.size_of(m.ty)? as i32)));
    let Some((mark_off, mark_size)) = mark.filter(|&(o, _)| o == off) else {
        return Err(env.reject(
            Errno::Eacces,
            format!("no write support to nf_conn at off {off}"),
        ));
    };
    let end = mark_off + mark_size;
    if off + size > end {
        return Err(env.reject(
            Errno::Eacces,
            format!(
                "write access at off {off} with size {size} beyond the member of nf_conn ended at {end}"
            ),
        ));
    }
    Ok(())
}

/// The vmlinux struct a map of `map_type` is (its ops' `map_btf_id`), by name.
fn map_struct_name(map_type: u32) -> Option<&'static str> {
    Some(match map_type {
        // array, percpu array, prog array, perf event array, cgroup array, array of maps
        2 | 3 | 4 | 6 | 8 | 12 => "bpf_array",
        // hash, percpu hash, LRU hash, LRU percpu hash, hash of maps
        1 | 5 | 9 | 10 | 13 => "bpf_htab",
        7 => "bpf_stack_map",
        11 => "lpm_trie",
        14 => "bpf_dtab",
        15 => "bpf_stab",
        16 => "bpf_cpu_map",
        17 => "xsk_map",
        18 => "bpf_shtab",
        20 => "reuseport_array",
        22 | 23 => "bpf_queue_stack",
        24 | 28 | 29 | 30 => "bpf_local_storage_map",
        25 => "bpf_dtab",
        27 | 31 => "bpf_ringbuf_map",
        32 => "bpf_bloom_filter",
        33 => "bpf_arena",
        _ => return None,
    })
}

/// `check_ptr_to_map_access`: a load from a map pointer reads the map's kernel structure.
pub fn check_ptr_to_map_access(
    env: &mut Env<'_>,
    reg: &RegState,
    regno: u8,
    off: i32,
    size: i32,
    write: bool,
) -> Result<Loaded, Reject> {
    let Some(btf) = env.input.vmlinux_btf() else {
        return Err(env.reject(
            Errno::Enotsupp,
            "map_ptr access not supported without CONFIG_DEBUG_INFO_BTF",
        ));
    };
    let map_type = reg.map.and_then(|m| env.map(m)).map_or(0, |m| m.map_type);
    let struct_id = map_struct_name(map_type)
        .and_then(|name| btf.find_by_name_kind(name, |k| matches!(k, BtfKind::Struct { .. })));
    let Some(struct_id) = struct_id else {
        return Err(env.reject(
            Errno::Enotsupp,
            format!("map_ptr access not supported for map type {map_type}"),
        ));
    };
    let tname = btf.name_of(struct_id).unwrap_or_default().to_owned();
    if off < 0 {
        return Err(env.reject(
            Errno::Eacces,
            format!("R{regno} is {tname} invalid negative access: off={off}"),
        ));
    }
    if write {
        return Err(env.reject(
            Errno::Eacces,
            format!("only read from {tname} is supported"),
        ));
    }
    struct_access(env, btf, struct_id, off as u32, size as u32)
}

/// `check_ptr_to_btf_access`: a load through a `ptr_` register (reads only; XDP has no
/// `btf_struct_access` hook that would allow writes).
pub fn check_ptr_to_btf_access(
    env: &mut Env<'_>,
    reg: &RegState,
    regno: u8,
    off: i32,
    size: i32,
    write: bool,
) -> Result<Loaded, Reject> {
    let Some(btf) = env.input.vmlinux_btf() else {
        return Err(env.reject(
            Errno::Enotsupp,
            "not yet supported: ptr_ access without vmlinux BTF",
        ));
    };
    let tname = btf.name_of(reg.btf_id).unwrap_or_default().to_owned();
    if off < 0 {
        return Err(env.reject(
            Errno::Eacces,
            format!("R{regno} is ptr_{tname} invalid negative access: off={off}"),
        ));
    }
    if !reg.var_off.is_const() || reg.var_off.value != 0 {
        return Err(env.reject(
            Errno::Eacces,
            format!(
                "R{regno} is ptr_{tname} invalid variable offset: off={off}, var_off={}",
                reg.var_off.text()
            ),
        ));
    }
    if reg.flags & MEM_USER != 0 {
        return Err(env.reject(
            Errno::Eacces,
            format!("R{regno} is ptr_{tname} access user memory: off={off}"),
        ));
    }
    if reg.flags & MEM_PERCPU != 0 {
        return Err(env.reject(
            Errno::Eacces,
            format!("R{regno} is ptr_{tname} access percpu memory: off={off}"),
        ));
    }
    if write {
        let written = nf_conn_write(env, btf, &tname, off, size);
        let kernel = env.input.kernel.version();
        if written.is_err() && crate::behaviour::names_refused_btf_writes(kernel) {
            return Err(env.reject(
                Errno::Eacces,
                format!("R{regno} cannot write into ptr_{tname} at off={off} size={size}"),
            ));
        }
        return written.map(|()| Loaded::Scalar);
    }
    let loaded = struct_access(env, btf, reg.btf_id, off as u32, size as u32)?;
    Ok(match loaded {
        // Pointers read through an untrusted pointer stay untrusted; otherwise (the old
        // compatible case: neither trusted nor RCU) the walk's RCU flag is dropped.
        Loaded::BtfId { id, .. } if reg.flags & PTR_UNTRUSTED != 0 => Loaded::BtfId {
            id,
            flags: PTR_UNTRUSTED,
        },
        Loaded::BtfId { id, flags } => Loaded::BtfId {
            id,
            flags: flags & !MEM_RCU,
        },
        other => other,
    })
}

/// `btf_struct_access`: walks nested structs until a scalar or a pointer is found.
fn struct_access(
    env: &mut Env<'_>,
    btf: &Btf,
    mut id: TypeId,
    mut off: u32,
    size: u32,
) -> Result<Loaded, Reject> {
    let mut flags = 0;
    loop {
        match struct_walk(btf, id, off, size, &mut flags) {
            Ok(Walk::Scalar) => return Ok(Loaded::Scalar),
            Ok(Walk::Ptr { id, flags: tag }) => {
                return Ok(Loaded::BtfId {
                    id,
                    flags: flags | tag,
                });
            }
            Ok(Walk::PtrUntrusted) => {
                let kernel = env.input.kernel.version();
                return Ok(
                    match crate::behaviour::reads_void_pointer_members_as_memory(kernel) {
                        true => Loaded::UntrustedMem,
                        false => Loaded::Scalar,
                    },
                );
            }
            Ok(Walk::Struct(next)) => {
                id = next;
                off = 0;
            }
            Err((errno, msg)) => return Err(env.reject(errno, msg)),
        }
    }
}

/// `btf_struct_ids_match`, not strict: an object of type `id` seen at offset `off` is a
/// `want` when it is one (at offset 0), or when the nested struct at `off`, or the first
/// struct nested at offset 0 of that, at any depth, is one.
pub(crate) fn struct_ids_match_at(btf: &Btf, mut id: TypeId, mut off: u32, want: TypeId) -> bool {
    if off == 0 && id == want {
        return true;
    }
    let mut flags = 0;
    for _ in 0..64 {
        let Ok(Walk::Struct(nested)) = struct_walk(btf, id, off, 1, &mut flags) else {
            return false;
        };
        if nested == want {
            return true;
        }
        (id, off) = (nested, 0);
    }
    false
}

type WalkError = (Errno, String);

/// `btf_struct_walk`, one level: which member of struct `id` the access falls in.
fn struct_walk(
    btf: &Btf,
    id: TypeId,
    mut off: u32,
    size: u32,
    flags: &mut u32,
) -> Result<Walk, WalkError> {
    let mut id = btf.skip_mods_and_typedefs(id).unwrap_or(id);
    loop {
        let t = btf
            .get(id)
            .ok_or((Errno::Einval, "bad BTF id".to_owned()))?;
        let tname = t.name.clone();
        let (tsize, members, is_union) = match &t.kind {
            BtfKind::Struct { size, members } => (*size, members, false),
            BtfKind::Union { size, members } => (*size, members, true),
            _ => return Err((Errno::Einval, format!("Type '{tname}' is not a struct"))),
        };
        // Walking a union of several members gives untrusted pointers.
        if is_union && members.len() != 1 {
            *flags |= PTR_UNTRUSTED;
        }
        let beyond = || {
            (
                Errno::Eacces,
                format!("access beyond struct {tname} at off {off} size {size}"),
            )
        };
        if off + size > tsize {
            // A flexible array as the last member may be read past the struct's size.
            let last = members.last().ok_or_else(beyond)?;
            let mtype = btf.skip_mods_and_typedefs(last.ty).unwrap_or(last.ty);
            let Some(BtfKind::Array { elem, len: 0, .. }) = btf.get(mtype).map(|t| &t.kind) else {
                return Err(beyond());
            };
            let moff = last.bit_offset / 8;
            if off < moff {
                return Err(beyond());
            }
            let elem = btf.skip_mods_and_typedefs(*elem).unwrap_or(*elem);
            match btf.get(elem).map(|t| &t.kind) {
                Some(BtfKind::Int { .. }) => return Ok(Walk::Scalar),
                Some(BtfKind::Struct { size: esize, .. }) if *esize > 0 => {
                    off = (off - moff) % esize;
                    id = elem;
                    continue;
                }
                _ => return Err(beyond()),
            }
        }
        match member_at(btf, &tname, members, off, size, flags)? {
            Step::Done(walk) => return Ok(walk),
            Step::Descend {
                id: inner,
                off: inner_off,
            } => {
                id = inner;
                off = inner_off;
            }
        }
    }
}

/// One member's verdict on the access.
enum Step {
    Done(Walk),
    /// Inside a nested struct or union, not at its start: walk it at this offset.
    Descend {
        id: TypeId,
        off: u32,
    },
}

/// The member of a struct (or union) the access `off`..`off + size` falls in.
fn member_at(
    btf: &Btf,
    tname: &str,
    members: &[bpfemu_loader::btf::Member],
    off: u32,
    size: u32,
    flags: &mut u32,
) -> Result<Step, WalkError> {
    for m in members {
        let mut moff = m.bit_offset / 8;
        if off + size <= moff {
            break;
        }
        if m.bitfield_size != 0 {
            // Only a read covering the whole bitfield (from at or before its first byte) is one.
            let end_byte = (m.bit_offset + m.bitfield_size).div_ceil(8);
            if off <= moff && end_byte <= off + size {
                return Ok(Step::Done(Walk::Scalar));
            }
            continue;
        }
        if off < moff {
            break;
        }
        let (mut mid, msize, elem, nelems) = resolve_size(btf, m.ty)
            .ok_or((Errno::Efault, format!("field {} doesn't have size", m.name)))?;
        let true_end = moff + msize;
        if off >= true_end {
            continue;
        }
        let mut msize = msize;
        if let Some(elem) = elem {
            if moff == true_end {
                continue;
            }
            msize /= nelems;
            moff += (off - moff) / msize * msize;
            mid = elem;
        }
        match btf.get(mid).map(|t| &t.kind) {
            Some(BtfKind::Struct { .. } | BtfKind::Union { .. }) => {
                if off == moff {
                    return Ok(Step::Done(Walk::Struct(mid)));
                }
                return Ok(Step::Descend {
                    id: mid,
                    off: off - moff,
                });
            }
            Some(BtfKind::Ptr { ty }) => {
                if msize != size || off != moff {
                    return Err((
                        Errno::Eacces,
                        format!(
                            "cannot access ptr member {} with moff {moff} in struct {tname} with \
                             off {off} size {size}",
                            m.name
                        ),
                    ));
                }
                let tag = match btf.get(*ty) {
                    Some(t) if matches!(t.kind, BtfKind::TypeTag { .. }) => match t.name.as_str() {
                        "user" => MEM_USER,
                        "percpu" => MEM_PERCPU,
                        "rcu" => MEM_RCU,
                        _ => 0,
                    },
                    _ => 0,
                };
                let target = btf.skip_mods_and_typedefs(*ty).unwrap_or(*ty);
                if matches!(
                    btf.get(target).map(|t| &t.kind),
                    Some(BtfKind::Struct { .. })
                ) {
                    *flags |= tag;
                    return Ok(Step::Done(Walk::Ptr {
                        id: target,
                        flags: 0,
                    }));
                }
                return Ok(Step::Done(Walk::PtrUntrusted));
            }
            _ => {}
        }
        // A scalar: the read may run on to the member's true end (an array of ints is
        // scratch space), not past it unless the walk is already untrusted.
        if off + size > true_end && *flags & PTR_UNTRUSTED == 0 {
            return Err((
                Errno::Eacces,
                format!(
                    "access beyond the end of member {} (mend:{true_end}) in struct {tname} \
                     with off {off} size {size}",
                    m.name
                ),
            ));
        }
        return Ok(Step::Done(Walk::Scalar));
    }
    Err((
        Errno::Einval,
        format!("struct {tname} doesn't have field at offset {off}"),
    ))
}

/// `__btf_resolve_size`: the member type with modifiers skipped, its total size, and for an
/// array (multi-dimensional ones linearised) its innermost element type and element count.
fn resolve_size(btf: &Btf, ty: TypeId) -> Option<(TypeId, u32, Option<TypeId>, u32)> {
    let id = btf.skip_mods_and_typedefs(ty)?;
    let mut elem = id;
    let mut nelems = 1u32;
    let mut is_array = false;
    while let Some(BtfKind::Array { elem: e, len, .. }) = btf.get(elem).map(|t| &t.kind) {
        is_array = true;
        nelems = nelems.checked_mul(*len)?;
        elem = btf.skip_mods_and_typedefs(*e)?;
    }
    let elem_size = match btf.get(elem).map(|t| &t.kind)? {
        BtfKind::Ptr { .. } => 8,
        _ => btf.size_of(elem)?,
    };
    let total = elem_size.checked_mul(nelems)?;
    Some((id, total, is_array.then_some(elem), nelems))
}

//! Arguments that point at a special field of a map value (`struct bpf_spin_lock`,
//! `struct bpf_timer`): the pointer must sit exactly on the field, which the map's BTF locates
//! (`check_map_field_pointer`, and the same steps in `process_spin_lock`).

use crate::env::Env;
use crate::log::kernel_map_name;
use crate::state::reg::{RegState, RegType};
use crate::{Errno, Reject};

/// Checks that `reg` (argument register `regno`) points at the map value's field `field`
/// (`bpf_spin_lock`, `bpf_timer`); returns the map's index.
pub fn check_map_field_pointer(
    env: &mut Env<'_>,
    reg: &RegState,
    regno: u8,
    field: &str,
) -> Result<u32, Reject> {
    if !reg.var_off.is_const() {
        return Err(env.reject(
            Errno::Einval,
            format!(
                "R{regno} doesn't have constant offset. {field} has to be at the constant offset"
            ),
        ));
    }
    // Only map values reach here in XDP: allocated objects (`ptr_` with MEM_ALLOC) come from
    // bpf_obj_new, a kfunc.
    let (RegType::MapValue, Some(map)) = (reg.ty, reg.map) else {
        return Err(env.reject(
            Errno::Enotsupp,
            format!("not yet supported: {field} outside a map value"),
        ));
    };
    let spec = env.map(map);
    let name = spec.map_or("", |s| kernel_map_name(&s.name)).to_owned();
    let has_btf = spec.is_some_and(|s| s.value_type.is_some()) && env.input.btf.is_some();
    if !has_btf {
        return Err(env.reject(
            Errno::Einval,
            format!("map '{name}' has to have BTF in order to use {field}"),
        ));
    }
    let field_off = env
        .map_special_fields(map)
        .iter()
        .find(|f| f.kind == field)
        .map(|f| f.offset);
    let Some(field_off) = field_off else {
        let msg =
            match crate::behaviour::words_map_fields_from_btf_record(env.input.kernel.version()) {
                true => format!("map '{name}' has no valid {field}"),
                false => format!("map '{name}' doesn't have 'struct {field}'"),
            };
        return Err(env.reject(Errno::Einval, msg));
    };
    let off = reg.var_off.value as i64 + reg.off as i64;
    if off != field_off as i64 {
        // Before the BTF record (6.2), the lock's message did not say where the lock is.
        let lock_words_only = field == "bpf_spin_lock"
            && !crate::behaviour::words_map_fields_from_btf_record(env.input.kernel.version());
        let msg = match lock_words_only {
            true => format!("off {off} doesn't point to 'struct {field}'"),
            false => format!("off {off} doesn't point to 'struct {field}' that is at {field_off}"),
        };
        return Err(env.reject(Errno::Einval, msg));
    }
    Ok(map)
}

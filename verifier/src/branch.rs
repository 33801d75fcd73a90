//! Conditional jumps (`check_cond_jmp_op`): branches decided by known bounds, refinement of both
//! edges, register-register comparisons, packet pointer comparisons that grow the proven
//! range, null checks that mark every copy with the same id.

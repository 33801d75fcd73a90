//! Liveness: which registers and stack slots a later instruction may read, so pruning ignores
//! the rest (`compute_live_registers` and the stack liveness of 6.18).

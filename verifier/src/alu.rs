//! Scalar transfer functions (`adjust_scalar_min_max_vals`): every ALU and ALU64 operation on
//! tnums and signed/unsigned 32/64-bit bounds, moves, sign extension, byte swaps.

//! Pointer arithmetic (`adjust_ptr_min_max_vals`): which operations on which pointer types the
//! kernel allows, the fixed and variable offsets that result, and its refusals.

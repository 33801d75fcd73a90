//! The kernel oracle (to be written).

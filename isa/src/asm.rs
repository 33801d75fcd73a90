//! Assembler (to be written).

//! Disassembler (to be written).

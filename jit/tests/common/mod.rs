//! Shared by the JIT's tests that run programs on real maps.

use bpfemu_isa::RawInsn;
use bpfemu_isa::asm::assemble_kernel;

/// `text` assembled, with `ld_imm64` constants `0xf00d0000 + i` made references to map `i`
/// (`BPF_PSEUDO_MAP_FD`), which the assembler's text cannot spell.
pub fn program(text: &str) -> Vec<RawInsn> {
    let mut raw = assemble_kernel(text).expect("the test program assembles");
    for slot in raw.iter_mut() {
        if slot.code == 0x18 && (slot.imm as u32) >> 16 == 0xf00d {
            slot.src = 1;
            slot.imm &= 0xffff;
        }
    }
    raw
}

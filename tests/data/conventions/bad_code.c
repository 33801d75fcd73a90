// Bad input for the section convention: `xdp` is taken whole (no function symbol) and calls
// instruction 100 of itself, which does not exist; `xdp.frags` is 12 bytes, not a whole number
// of instructions. Each must be a one-line error naming the file and the place, never a panic.
// Rebuild (in this directory): clang-19 -O2 -target bpf -mcpu=v3 -c bad_code.c -o bad_code.o
// bad_call.o is the same without `xdp.frags`: remove that section with
//   llvm-objcopy-19 --remove-section=xdp.frags bad_code.o bad_call.o
asm(".section xdp,\"ax\",@progbits\n"
    ".quad 0x0000006400001085\n" /* call pc+100 (src_reg 1: a bpf-to-bpf call) */
    "r0 = 2\n"
    "exit\n"
    ".section xdp.frags,\"ax\",@progbits\n"
    "r0 = 2\n"
    ".long 0x95\n");

char LICENSE[] __attribute__((section("license"), used)) = "GPL";

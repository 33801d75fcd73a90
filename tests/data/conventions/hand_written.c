// Hand-written code with no symbol table at all, as iproute2's legacy loader and the kernel's
// old samples/bpf loader took it: each executable section is one program named by its section.
// `xdp` calls a function inside itself through a local label, a call no relocation names
// (the section is loaded whole, so it keeps pointing where it points); `prog` is iproute2's
// default section. libbpf refuses the object (no symbol table).
// Rebuild (in this directory):
//   clang-19 -O2 -target bpf -mcpu=v3 -c hand_written.c -o hand_written.o
//   llvm-objcopy-19 --strip-all hand_written.o
asm(".section xdp,\"ax\",@progbits\n"
    "call .Llong_enough\n"
    "if r0 == 0 goto .Ldrop\n"
    "r0 = 2\n"
    "exit\n"
    ".Ldrop:\n"
    "r0 = 1\n"
    "exit\n"
    ".Llong_enough:\n"
    "r2 = *(u32 *)(r1 + 4)\n"
    "r1 = *(u32 *)(r1 + 0)\n"
    "r2 -= r1\n"
    "r0 = 0\n"
    "if r2 < 60 goto .Lshort\n"
    "r0 = 1\n"
    ".Lshort:\n"
    "exit\n"
    ".section prog,\"ax\",@progbits\n"
    "r0 = 3\n"
    "exit\n");

char LICENSE[] __attribute__((section("license"), used)) = "GPL";

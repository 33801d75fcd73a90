// Code in a program section with no function symbol (what stripped objects and old compilers
// leave): libbpf makes no program of it; bpfemu takes the section whole as one program named
// by it, as iproute2 does, and says so.
asm(".section xdp_raw,\"ax\",@progbits\n"
    "r0 = 2\n"
    "exit\n");

char LICENSE[] __attribute__((section("license"), used)) = "GPL";

//! What a global function's parameters may be, per kernel (`btf_prepare_func_args`).

use bpfemu_isa::KernelVersion;

/// Whether a pointer parameter other than the context is taken (as memory of the pointee's
/// size, maybe null). 5.10 takes scalars and the context only and refuses the rest with
/// "Arg#N type PTR in f() is not supported yet." (pointers to memory arrived in 5.12).
pub fn takes_memory_pointers(version: KernelVersion) -> bool {
    version > KernelVersion::V5_10
}

/// Whether `arg:` decl tags (`arg:ctx`, `arg:nullable`, `arg:trusted`, ...) are read. They
/// arrived in 6.8: 5.10 and 6.1 never look at them (on 5.10 libbpf even strips the decl tags,
/// a BTF kind that kernel lacks).
pub fn reads_arg_tags(version: KernelVersion) -> bool {
    version >= KernelVersion::V6_12
}

/// Whether every global function is verified on its own before the main program (and
/// whether called or not). From 6.8 the main program comes first and a global function is
/// verified only once a walk calls it; before, a prototype the kernel refuses is the
/// program's final error, where later kernels say "Caller passes invalid args" at the call.
pub fn verified_before_main(version: KernelVersion) -> bool {
    version < KernelVersion::V6_12
}

/// The refusal of a call whose arguments do not fit global function `subprog`: from 6.8 it
/// names the function too.
pub fn caller_mismatch(version: KernelVersion, subprog: usize, name: &str) -> String {
    match version >= KernelVersion::V6_12 {
        true => format!("Caller passes invalid args into func#{subprog} ('{name}')"),
        false => format!("Caller passes invalid args into func#{subprog}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_on_each_side() {
        assert!(!takes_memory_pointers(KernelVersion::V5_10));
        assert!(takes_memory_pointers(KernelVersion::V6_1));
        assert!(!reads_arg_tags(KernelVersion::V6_1));
        assert!(reads_arg_tags(KernelVersion::V6_12));
        assert!(verified_before_main(KernelVersion::V6_1));
        assert!(!verified_before_main(KernelVersion::V6_12));
    }
}

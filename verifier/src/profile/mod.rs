//! Kernel profiles: what differs between the kernels bpfemu answers as, as data keyed by
//! [`KernelVersion`](bpfemu_isa::KernelVersion), read where the verifier already decides.
//!
//! - [`insns`]: the instructions each version decodes, and when and how it refuses the others
//!   (the pass before the walk, or the walk on arrival);
//! - [`helpers`]: the helper ids each version has and which of them XDP may call, with the
//!   words of its refusal;
//! - [`maps`]: the map types each version can create;
//! - [`global_funcs`]: what a global function's parameters may be.
//! - [`kfuncs`]: the kfuncs each version lets XDP call.
//!
//! Every entry was read in that version's source (Debian's packages of 5.10, 6.1, 6.12 and
//! 7.2) and held to what that kernel said when booted; 6.18 is the verifier bpfemu models, so
//! each table says only how the others differ from it.

pub mod global_funcs;
pub mod helpers;
pub mod insns;
pub mod kfuncs;
pub mod maps;

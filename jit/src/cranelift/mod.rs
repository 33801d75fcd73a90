//! The Cranelift tier: optimised native code for any host Cranelift supports. The shape
//! follows wasmtime's bytecode translator, one file per concern:
//! - [`compile`]: the driver. Declares the functions of a program set, builds each one's
//!   blocks ([`crate::plan::Cfg`]) and hands them to the translator.
//! - [`translate`]: one match arm per instruction: ALU with 32-bit zero extension, the
//!   kernel's division rules, sign extension, byte swaps, jumps of both widths, loads and
//!   stores, real atomic instructions, calls, `may_goto`, exits.
//! - [`bounds`]: the memory-check strategy of each [`Mode`](crate::Mode), apart from the
//!   opcodes.
//! - [`environ`]: [`VmEnv`](environ::VmEnv), the only door from translated code to the
//!   runtime (memory checks, helper calls with tail calls and callbacks, kfunc calls, stack
//!   frames, errors).
//! - [`inline`]: the fast paths of the helper calls [`crate::plan::inline_helper`] inlines.

pub mod bounds;
pub mod compile;
pub mod environ;
pub mod inline;
pub mod translate;

pub use compile::{Opt, compile, opt_level};

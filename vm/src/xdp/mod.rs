//! The XDP runtime: a loaded XDP object run on one packet at a time exactly as
//! `BPF_PROG_TEST_RUN` runs it (net/bpf/test_run.c), with the kernel's helpers.
//!
//! - [`frame`]: [`XdpFrame`], the `xdp_buff` test_run builds (a packet past the 3520-byte
//!   linear part continues in up to 17 page-sized fragments), the bounds arithmetic of
//!   `bpf_xdp_adjust_head/meta/tail` and the byte walks of `bpf_xdp_load_bytes/store_bytes`.
//! - [`ctx`]: `struct xdp_md` and its conversion to `xdp_buff` loads.
//! - [`prepare`]: map, map value and callback references resolved; helpers and kfuncs checked.
//! - [`helpers`]: the helper table and one file per helper family.
//! - [`kfuncs`]: the kfunc table (the numeric iterator), kfunc ids resolved by BTF name.
//! - [`determinism`]: clocks from the packet, seeded random numbers, virtual CPUs.
//! - [`runtime`]: [`XdpRuntime`], [`XdpConfig`], [`PacketMeta`], [`XdpOutcome`].
//!
//! ```
//! use bpfemu_isa::{Insn, Program, RawInsn, Reg, Size};
//! use bpfemu_vm::xdp::{PacketMeta, XdpAction, XdpConfig, XdpProgramSpec, XdpRuntime};
//!
//! // r2 = ctx->data_end; r1 = ctx->data; r0 = XDP_DROP if the packet is under 60 bytes.
//! let insns = [
//!     RawInsn::new(0x61, 2, 1, 4, 0),  // r2 = *(u32 *)(r1 + 4)
//!     RawInsn::new(0x61, 1, 1, 0, 0),  // r1 = *(u32 *)(r1 + 0)
//!     RawInsn::new(0x1f, 2, 1, 0, 0),  // r2 -= r1
//!     RawInsn::new(0xb7, 0, 0, 0, 1),  // r0 = XDP_DROP
//!     RawInsn::new(0xa5, 2, 0, 1, 60), // if r2 < 60 goto +1
//!     RawInsn::new(0xb7, 0, 0, 0, 2),  // r0 = XDP_PASS
//!     RawInsn::new(0x95, 0, 0, 0, 0),  // exit
//! ];
//! let prog = XdpProgramSpec { name: "len".into(), insns: insns.to_vec() };
//! let mut rt = XdpRuntime::new(vec![prog], vec![], XdpConfig::default()).unwrap();
//! let out = rt.run(0, &[0u8; 64], &PacketMeta::default()).unwrap();
//! assert_eq!(out.action, XdpAction::Pass);
//! assert_eq!(rt.run(0, &[0u8; 20], &PacketMeta::default()).unwrap().action, XdpAction::Drop);
//! assert!(rt.run(0, &[0u8; 10], &PacketMeta::default()).is_err()); // shorter than ETH_HLEN
//! ```

pub mod ctx;
pub mod determinism;
pub mod errno;
pub mod frame;
pub mod helpers;
pub mod kfuncs;
pub mod prepare;
pub mod runtime;

pub use frame::XdpFrame;
pub use prepare::PrepareError;
pub use runtime::{
    LOOPBACK, MapInit, NetDevice, PacketError, PacketMeta, PacketTaint, PerfEvent, RedirectTarget,
    RingEvent, RuntimeError, XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_REDIRECT, XDP_TX, XdpAction,
    XdpConfig, XdpOutcome, XdpProgramSpec, XdpRuntime, XdpVerdict,
};

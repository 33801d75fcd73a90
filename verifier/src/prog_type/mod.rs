//! What depends on the program type: the ctx layout and access rules, the return-value range.
//! XDP first ([`xdp`]); tc and socket filters would add their own [`ProgTypeOps`].

pub mod xdp;

use crate::state::RegType;

pub use bpfemu_isa::uapi::BPF_PROG_TYPE_XDP;

/// What a valid ctx access loads (`struct bpf_insn_access_aux`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtxAccess {
    /// The type the loaded register gets (`Scalar` for plain fields, `Packet`, `PacketEnd`,
    /// `PacketMeta` for the xdp_md pointers).
    pub reg_type: RegType,
    /// Size of the whole field (`ctx_field_size`), for narrow-load conversion.
    pub ctx_field_size: u32,
    /// Offset of the field in the ctx structure.
    pub field_off: i32,
}

/// The range R0 must be in at the program's exit (`struct bpf_retval_range`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetvalRange {
    pub min: i32,
    pub max: i32,
}

/// One program type's rules.
pub trait ProgTypeOps: Sync {
    /// The type's name as the kernel prints it (`xdp`).
    fn name(&self) -> &'static str;

    /// `is_valid_access`: the access of `size` bytes at ctx offset `off` by a program loaded
    /// with `expected_attach_type`; `None` when the kernel refuses it (the caller prints
    /// `invalid bpf_context access off=N size=M`).
    fn ctx_access(
        &self,
        off: i32,
        size: u32,
        write: bool,
        expected_attach_type: u32,
    ) -> Option<CtxAccess>;

    /// The range R0 must be in at exit of the main program; `None` when anything goes.
    fn return_range(&self, expected_attach_type: u32) -> Option<RetvalRange>;

    /// Whether direct packet writes are allowed (`may_access_direct_pkt_data` for writes).
    fn may_write_packet(&self) -> bool;
}

/// The rules of `prog_type`; `None` for types bpfemu does not verify.
pub fn ops_for(prog_type: u32) -> Option<&'static dyn ProgTypeOps> {
    match prog_type {
        BPF_PROG_TYPE_XDP => Some(&xdp::Xdp),
        _ => None,
    }
}

//! Multi-buffer frames through the runtime: a packet past the 3520-byte linear part runs with
//! the rest in page-sized fragments, which the program reaches only through helpers.

use bpfemu_isa::asm::assemble_kernel;
use bpfemu_vm::maps::Errno;
use bpfemu_vm::xdp::{PacketError, PacketMeta, XdpConfig, XdpProgramSpec, XdpRuntime};

fn runtime(src: &str) -> XdpRuntime {
    let spec = XdpProgramSpec {
        name: "p".into(),
        insns: assemble_kernel(src).unwrap(),
    };
    XdpRuntime::new(vec![spec], vec![], XdpConfig::default()).unwrap()
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i ^ (i >> 8)) as u8).collect()
}

#[test]
fn jumbo_frames_run_with_fragments_up_to_17() {
    let mut rt = runtime("call bpf_xdp_get_buff_len#188\nexit\n");
    for len in [3520usize, 3521, 9000, 73152] {
        let out = rt.run(0, &pattern(len), &PacketMeta::default()).unwrap();
        assert_eq!(out.retval as usize, len);
        assert_eq!(out.data_out, pattern(len));
        assert_eq!(out.frags_len, len - len.min(3520));
    }
    let err = rt
        .run(0, &pattern(73153), &PacketMeta::default())
        .unwrap_err();
    assert!(
        matches!(err, PacketError::Refused { errno, .. } if errno == Errno::ENOMEM),
        "{err}"
    );
}

#[test]
fn fragment_bytes_are_out_of_direct_reach() {
    // r0 = *(u8 *)data_end: past the linear part, even though the packet goes on.
    let mut rt = runtime("r2 = *(u32 *)(r1 +4)\nr0 = *(u8 *)(r2 +0)\nexit\n");
    let err = rt
        .run(0, &pattern(9000), &PacketMeta::default())
        .unwrap_err();
    assert!(matches!(err, PacketError::Run { .. }), "{err}");
}

#[test]
fn load_and_store_bytes_cross_fragment_boundaries() {
    // Load 16 bytes at 3512 (8 linear, 8 in the first fragment), store them at 7610 (6 in
    // the first fragment, 10 in the second); r0 = the store's result.
    let mut rt = runtime(
        "r6 = r1\nr2 = 3512\nr3 = r10\nr3 += -16\nr4 = 16\ncall bpf_xdp_load_bytes#189\n\
         r1 = r6\nr2 = 7610\nr3 = r10\nr3 += -16\nr4 = 16\ncall bpf_xdp_store_bytes#190\nexit\n",
    );
    let data = pattern(9000);
    let out = rt.run(0, &data, &PacketMeta::default()).unwrap();
    assert_eq!(out.retval, 0);
    let mut expect = data.clone();
    expect.copy_within(3512..3528, 7610);
    assert_eq!(out.data_out, expect);
}

#[test]
fn adjust_tail_shrinks_fragments_before_the_linear_part() {
    // adjust_tail(-(3520 - 128)): a snap-length cut written for linear frames takes the
    // bytes from the fragments; the linear part keeps its 3520 bytes.
    let mut rt = runtime(
        "r6 = r1\nr2 = -3392\ncall bpf_xdp_adjust_tail#65\nr2 = *(u32 *)(r6 +4)\n\
         r1 = *(u32 *)(r6 +0)\nr2 -= r1\nr0 = r2\nexit\n",
    );
    let data = pattern(9000);
    let out = rt.run(0, &data, &PacketMeta::default()).unwrap();
    assert_eq!(out.retval, 3520);
    assert_eq!(out.data_out, data[..9000 - 3392]);
    assert_eq!(out.frags_len, 9000 - 3392 - 3520);
}

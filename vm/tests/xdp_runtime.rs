//! The XDP runtime through small hand-written programs: ctx conversion, tail-call limit,
//! `bpf_loop`, redirect flags, load-time refusals.

use bpfemu_isa::RawInsn;
use bpfemu_vm::maps::{MapSpec, MapType};
use bpfemu_vm::xdp::{
    MapInit, PacketMeta, PrepareError, RedirectTarget, XdpAction, XdpConfig, XdpProgramSpec,
    XdpRuntime,
};

fn ins(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> RawInsn {
    RawInsn::new(code, dst, src, off, imm)
}
const EXIT: RawInsn = RawInsn::new(0x95, 0, 0, 0, 0);
fn mov(dst: u8, imm: i32) -> RawInsn {
    ins(0xb7, dst, 0, 0, imm)
}
fn call(id: i32) -> RawInsn {
    ins(0x85, 0, 0, 0, id)
}
/// ld_imm64 of map `index` (two slots).
fn ld_map(dst: u8, index: i32) -> [RawInsn; 2] {
    [ins(0x18, dst, 1, 0, index), ins(0, 0, 0, 0, 0)]
}

fn prog(name: &str, insns: Vec<RawInsn>) -> XdpProgramSpec {
    XdpProgramSpec {
        name: name.into(),
        insns,
    }
}

fn runtime(progs: Vec<XdpProgramSpec>, maps: Vec<(MapSpec, MapInit)>) -> XdpRuntime {
    XdpRuntime::new(progs, maps, XdpConfig::default()).unwrap()
}

#[test]
fn ctx_fields_are_converted() {
    // r0 = ctx->ingress_ifindex * 100 + ctx->rx_queue_index
    let p = vec![
        ins(0x61, 2, 1, 12, 0),
        ins(0x27, 2, 0, 0, 100),
        ins(0x61, 0, 1, 16, 0),
        ins(0x0f, 0, 2, 0, 0),
        EXIT,
    ];
    let mut rt = runtime(vec![prog("p", p)], vec![]);
    let meta = PacketMeta {
        ingress_ifindex: 7,
        rx_queue_index: 3,
        ..PacketMeta::default()
    };
    assert_eq!(rt.run(0, &[0; 60], &meta).unwrap().retval, 703);
    // A store to the ctx faults.
    let store = vec![ins(0x62, 1, 0, 0, 1), mov(0, 2), EXIT];
    let mut rt = runtime(vec![prog("s", store)], vec![]);
    let err = rt.run(0, &[0; 60], &PacketMeta::default()).unwrap_err();
    assert!(err.to_string().contains("ctx"), "{err}");
}

#[test]
fn tail_calls_stop_after_33() {
    // Program 0: counter r6 in a map value is not available; count through r0 instead:
    // each program tail-calls slot 0 (itself) after adding 1 to a .bss-like array value.
    let counter = MapSpec::new("count", MapType::Array, 4, 8, 1);
    let jumps = MapSpec::new("jumps", MapType::ProgArray, 4, 4, 1);
    let mut p = vec![
        mov(2, 0),
        ins(0x63, 10, 2, -4, 0),
        ins(0xbf, 2, 10, 0, 0),
        ins(0x07, 2, 0, 0, -4),
    ];
    p.extend(ld_map(1, 0));
    p.push(call(1)); // r0 = lookup(count, &0)
    p.push(ins(0x15, 0, 0, 7, 0)); // if r0 == 0 goto exit
    p.push(mov(1, 1));
    p.push(ins(0xdb, 0, 1, 0, 0)); // lock *(u64 *)(r0 + 0) += r1
    p.push(ins(0xbf, 1, 6, 0, 0)); // r1 = ctx (saved in r6)
    p.extend(ld_map(2, 1));
    p.push(mov(3, 0));
    p.push(call(12)); // tail_call(ctx, jumps, 0)
    p.extend([mov(0, 2), EXIT]);
    p.insert(0, ins(0xbf, 6, 1, 0, 0)); // r6 = r1
    let init = MapInit {
        prog_slots: vec![(0, 0)],
        ..MapInit::default()
    };
    let mut rt = runtime(
        vec![prog("loop", p)],
        vec![(counter, MapInit::default()), (jumps, init)],
    );
    let out = rt.run(0, &[0; 60], &PacketMeta::default()).unwrap();
    assert_eq!(out.action, XdpAction::Pass);
    let (maps, mem) = rt.maps_mut();
    let value = maps.sys_lookup(mem, 0, &0u32.to_ne_bytes(), 0).unwrap();
    assert_eq!(u64::from_ne_bytes(value[..8].try_into().unwrap()), 34);
}

#[test]
fn bpf_loop_runs_callbacks_and_checks_its_arguments() {
    // r0 = bpf_loop(r7, &cb, NULL, r8); cb: return i == 4
    let build = |nr: i32, flags: i32| {
        vec![
            mov(1, nr),
            ins(0x18, 2, 4, 0, 6), // r2 = &cb (pc 1 + 6 + 1 = 8)
            ins(0, 0, 0, 0, 0),
            mov(3, 0),
            mov(4, flags),
            call(181),
            EXIT,
            EXIT,                  // padding, never reached
            ins(0xb7, 0, 0, 0, 0), // cb: r0 = 0
            ins(0x55, 1, 0, 1, 4), // if r1 != 4 goto +1
            mov(0, 1),
            EXIT,
        ]
    };
    let cases = [
        (3, 0, 3i64),
        (10, 0, 5),
        (0, 0, 0),
        (1, 1, -22),
        ((1 << 23) + 1, 0, -7),
    ];
    for (nr, flags, want) in cases {
        let mut rt = runtime(vec![prog("l", build(nr, flags))], vec![]);
        let out = rt.run(0, &[0; 60], &PacketMeta::default()).unwrap();
        assert_eq!(out.retval as i32 as i64, want, "nr {nr} flags {flags}");
    }
}

#[test]
fn redirect_map_flags_and_fallback() {
    let dev = MapSpec::new("tx", MapType::Devmap, 4, 4, 4);
    let build = |key: i32, flags: i32| {
        let mut p = ld_map(1, 0).to_vec();
        p.extend([mov(2, key), mov(3, flags), call(51), EXIT]);
        p
    };
    let cases = [
        (1, 2, 4),
        (2, 2, 2),
        (2, 1, 1),
        (2, 3 | 8, 4),
        (1, 1 << 5, 0),
        (2, 8 | 16, 4),
    ];
    for (key, flags, want) in cases {
        let mut rt = runtime(
            vec![prog("r", build(key, flags))],
            vec![(dev.clone(), MapInit::default())],
        );
        let (maps, mem) = rt.maps_mut();
        maps.sys_update(mem, 0, &1u32.to_ne_bytes(), &5u32.to_ne_bytes(), 0)
            .unwrap();
        let out = rt.run(0, &[0; 60], &PacketMeta::default()).unwrap();
        assert_eq!(out.retval, want, "key {key} flags {flags:#x}");
        if want == 4 {
            let broadcast = flags & 8 != 0;
            assert_eq!(
                out.redirect,
                Some(RedirectTarget::Dev {
                    map: "tx".into(),
                    key: key as u32,
                    ifindex: (key == 1).then_some(5),
                    broadcast,
                    exclude_ingress: flags & 16 != 0,
                })
            );
        }
    }
}

#[test]
fn unknown_helpers_and_kfuncs_are_refused_for_the_program_that_has_them() {
    let rt = XdpRuntime::new(
        vec![
            prog("u", vec![call(26), EXIT]),
            prog("k", vec![ins(0x85, 0, 2, 0, 1234), EXIT]),
            prog("fine", vec![ins(0xb7, 0, 0, 0, 2), EXIT]),
        ],
        vec![],
        XdpConfig::default(),
    )
    .expect("one program's helper does not stop the others");
    let err = rt.runnable(0).unwrap_err();
    assert!(matches!(err, PrepareError::UnknownHelper { id: 26, .. }));
    assert!(
        err.to_string().contains("helper 26 (bpf_skb_load_bytes)"),
        "{err}"
    );
    let err = rt.runnable(1).unwrap_err();
    assert!(err.to_string().contains("kfunc call (btf id 1234"), "{err}");
    assert!(rt.runnable(2).is_ok());
}

#[test]
fn a_program_that_cannot_be_prepared_is_not_run() {
    let mut rt = XdpRuntime::new(
        vec![prog("u", vec![call(26), EXIT])],
        vec![],
        XdpConfig::default(),
    )
    .unwrap();
    let err = rt.run(0, &[0; 64], &PacketMeta::default()).unwrap_err();
    assert!(
        err.to_string().contains("helper 26 (bpf_skb_load_bytes)"),
        "{err}"
    );
}

#[test]
fn printk_lines_are_captured() {
    // "n=%d\n" on the stack, then trace_printk(fmt, 6, 42)
    let fmt = u64::from_le_bytes(*b"n=%d\n\0\0\0");
    let p = vec![
        ins(0x18, 1, 0, 0, fmt as u32 as i32),
        ins(0, 0, 0, 0, (fmt >> 32) as u32 as i32),
        ins(0x7b, 10, 1, -8, 0),
        ins(0xbf, 1, 10, 0, 0),
        ins(0x07, 1, 0, 0, -8),
        mov(2, 6),
        mov(3, 42),
        call(6),
        EXIT,
    ];
    let mut rt = runtime(vec![prog("p", p)], vec![]);
    let out = rt.run(0, &[0; 60], &PacketMeta::default()).unwrap();
    assert_eq!(out.printk, vec!["n=42".to_string()]);
    assert_eq!(out.retval, 5);
}

//! BTF / BTF.ext parsing: hand-built blobs in both byte orders, each error path, the test
//! object's BTF.ext, and a property test that mutated or truncated blobs never panic.

mod core_util;

use bpfemu_loader::btf::{Btf, BtfError, BtfExt, BtfKind, CoreReloKind, Linkage};
use bpfemu_loader::core_relo::relocate;
use core_util::load_object;
use proptest::prelude::*;

/// Builds a raw BTF blob from `(name, info, size_or_type, extra words)` records.
struct Builder {
    big_endian: bool,
    types: Vec<u32>,
    strings: Vec<u8>,
}

impl Builder {
    fn new(big_endian: bool) -> Self {
        Builder {
            big_endian,
            types: vec![],
            strings: vec![0],
        }
    }
    fn str(&mut self, s: &str) -> u32 {
        let off = self.strings.len() as u32;
        self.strings.extend_from_slice(s.as_bytes());
        self.strings.push(0);
        off
    }
    fn ty(
        &mut self,
        name: &str,
        kind: u32,
        kflag: bool,
        vlen: u32,
        size_or_type: u32,
        extra: &[u32],
    ) {
        let name = if name.is_empty() { 0 } else { self.str(name) };
        let info = (u32::from(kflag) << 31) | (kind << 24) | vlen;
        self.types.extend([name, info, size_or_type]);
        self.types.extend_from_slice(extra);
    }
    fn word(&self, w: u32) -> [u8; 4] {
        if self.big_endian {
            w.to_be_bytes()
        } else {
            w.to_le_bytes()
        }
    }
    fn build(&self) -> Vec<u8> {
        let mut out = vec![];
        let magic: u16 = 0xeb9f;
        out.extend(if self.big_endian {
            magic.to_be_bytes()
        } else {
            magic.to_le_bytes()
        });
        out.extend([1, 0]);
        let type_len = self.types.len() as u32 * 4;
        for w in [24, 0, type_len, type_len, self.strings.len() as u32] {
            out.extend(self.word(w));
        }
        for &w in &self.types {
            out.extend(self.word(w));
        }
        out.extend(&self.strings);
        out
    }
}

/// int (1), struct with a bitfield (2), signed enum (3), fwd union (4), func proto (5),
/// func (6), enum64 (7), const (8), decl_tag (9), float (10).
fn sample(big_endian: bool) -> Vec<u8> {
    let mut b = Builder::new(big_endian);
    b.ty("int", 1, false, 0, 4, &[(1 << 24) | 32]);
    let (a, c) = (b.str("a"), b.str("c"));
    b.ty("s", 4, true, 2, 8, &[a, 1, 0, c, 1, (3 << 24) | 35]);
    let m = b.str("M");
    b.ty("e", 6, true, 1, 4, &[m, (-2i32) as u32]);
    b.ty("u", 7, true, 0, 0, &[]);
    let p = b.str("x");
    b.ty("", 13, false, 1, 1, &[p, 1]);
    b.ty("f", 12, false, 1, 5, &[]);
    let big = b.str("BIG");
    b.ty("e64", 19, false, 1, 8, &[big, 1, 2]);
    b.ty("", 10, false, 0, 2, &[]);
    b.ty("tag", 17, false, 0, 2, &[1]);
    b.ty("double", 16, false, 0, 8, &[]);
    b.build()
}

#[test]
fn parses_every_kind_in_both_byte_orders() {
    let le = Btf::parse(&sample(false)).expect("little-endian");
    let be = Btf::parse(&sample(true)).expect("big-endian");
    assert_eq!(le.types, be.types);
    let t = &le.types;
    assert!(
        matches!(t[1].kind, BtfKind::Int { size: 4, bits: 32, encoding, .. } if encoding.signed)
    );
    let BtfKind::Struct { members, .. } = &t[2].kind else {
        panic!()
    };
    assert_eq!((members[1].bit_offset, members[1].bitfield_size), (35, 3));
    assert!(
        matches!(&t[3].kind, BtfKind::Enum { signed: true, values, .. } if values[0].value == (-2i64) as u64)
    );
    assert_eq!(t[4].kind, BtfKind::Fwd { union: true });
    assert_eq!(
        t[6].kind,
        BtfKind::Func {
            proto: 5,
            linkage: Linkage::Global
        }
    );
    assert!(
        matches!(&t[7].kind, BtfKind::Enum64 { values, .. } if values[0].value == (2 << 32) | 1)
    );
    assert_eq!(
        t[9].kind,
        BtfKind::DeclTag {
            ty: 2,
            component_idx: 1
        }
    );
    assert_eq!(le.type_name(8), "const struct s");
    assert_eq!(le.type_name(5), "int (int)");
    assert_eq!(le.size_of(8), Some(8));
    assert_eq!(le.skip_mods_and_typedefs(8), Some(2));
}

#[test]
fn header_errors() {
    let blob = sample(false);
    assert!(matches!(
        Btf::parse(&blob[..10]),
        Err(BtfError::Truncated { what: "header", .. })
    ));
    let mut bad = blob.clone();
    bad[0] = 0;
    assert!(matches!(Btf::parse(&bad), Err(BtfError::BadMagic { .. })));
    let mut bad = blob.clone();
    bad[2] = 2;
    assert!(matches!(
        Btf::parse(&bad),
        Err(BtfError::BadVersion { version: 2, .. })
    ));
    let e = Btf::parse(&blob[..blob.len() - 1]).unwrap_err();
    assert!(e.to_string().contains("string section"), "{e}");
}

#[test]
fn type_errors_name_the_type_and_offset() {
    let mut b = Builder::new(false);
    b.ty("int", 1, false, 0, 4, &[32]);
    b.ty("", 25, false, 0, 0, &[]);
    let e = Btf::parse(&b.build()).unwrap_err();
    assert_eq!(
        e,
        BtfError::UnknownKind {
            type_id: 2,
            offset: 24 + 16,
            kind: 25
        }
    );
    assert_eq!(e.to_string(), "BTF type [2] at byte 40: unknown kind 25");

    let mut b = Builder::new(false);
    b.ty("", 2, false, 0, 7, &[]);
    let e = Btf::parse(&b.build()).unwrap_err();
    assert!(
        matches!(
            e,
            BtfError::BadTypeRef {
                type_id: 1,
                bad_id: 7,
                ..
            }
        ),
        "{e}"
    );

    let mut b = Builder::new(false);
    b.types.extend([999, 1 << 24, 4, 32]);
    let e = Btf::parse(&b.build()).unwrap_err();
    assert!(
        matches!(e, BtfError::StringOffset { str_off: 999, .. }),
        "{e}"
    );

    let mut b = Builder::new(false);
    b.ty("s", 4, false, 3, 8, &[0, 0, 0]);
    let e = Btf::parse(&b.build()).unwrap_err();
    assert!(
        matches!(
            e,
            BtfError::Truncated {
                what: "members",
                ..
            }
        ),
        "{e}"
    );
}

/// What libbpf's parser reads and only the kernel refuses parses, and `kernel_refusal` gives
/// the kernel's rule (libbpf then loads the programs without BTF); a size the kernel takes is
/// taken. Each answer is the one 6.18's BPF_BTF_LOAD gave these blobs.
#[test]
fn kernel_only_rules_are_left_to_the_kernel_model() {
    let int = |b: &mut Builder, size: u32, bits: u32| b.ty("int", 1, false, 0, size, &[bits]);
    let refusal = |b: &Builder| {
        let btf = Btf::parse(&b.build()).expect("libbpf reads it");
        btf.kernel_refusal()
    };

    // An INT of 3 bytes holding 24 bits, and an array of 16-byte ones indexed by one: taken.
    let mut b = Builder::new(false);
    int(&mut b, 3, 24);
    b.ty("i128", 1, false, 0, 16, &[128]);
    b.ty("", 3, false, 0, 0, &[2, 2, 4]);
    assert_eq!(refusal(&b), None);
    // An index of 3 bytes is not a regular int (whole bytes, a power of two of them).
    let mut b = Builder::new(false);
    int(&mut b, 3, 24);
    b.ty("", 3, false, 0, 0, &[1, 1, 4]);
    assert_eq!(refusal(&b).as_deref(), Some("[2] Invalid index"));
    // Its bits past its size: the kernel's meta check.
    let mut b = Builder::new(false);
    int(&mut b, 3, 32);
    assert_eq!(
        refusal(&b).as_deref(),
        Some("[1] nr_bits exceeds type_size")
    );

    // FUNC linkage 3 and VAR linkage 7.
    let mut b = Builder::new(false);
    int(&mut b, 4, 32);
    b.ty("", 13, false, 0, 1, &[]);
    b.ty("f", 12, false, 3, 2, &[]);
    assert_eq!(refusal(&b).as_deref(), Some("[3] Invalid func linkage"));
    let mut b = Builder::new(false);
    int(&mut b, 4, 32);
    b.ty("v", 14, false, 0, 1, &[7]);
    assert_eq!(refusal(&b).as_deref(), Some("[2] Linkage not supported"));

    // A prototype returning type 9 of 2.
    let mut b = Builder::new(false);
    int(&mut b, 4, 32);
    b.ty("", 13, false, 0, 9, &[]);
    assert_eq!(refusal(&b).as_deref(), Some("[2] Invalid return type"));
}

#[test]
fn test_object_btf_ext() {
    let obj = load_object("core_fields.o");
    let ext = &obj.ext;
    let funcs: Vec<u32> = ext.func_info[0].records.iter().map(|f| f.insn).collect();
    assert_eq!(
        (ext.func_info[0].section.as_str(), funcs),
        ("xdp", vec![0, 74, 103])
    );
    let name = |id| obj.btf.name_of(id).unwrap().to_string();
    let names: Vec<String> = ext.func_info[0]
        .records
        .iter()
        .map(|f| name(f.type_id))
        .collect();
    assert_eq!(names, ["fields", "types", "poisoned"]);
    let lines = &ext.line_info[0].records;
    assert!(lines.iter().all(|l| l.file_name.ends_with("core_fields.c")));
    assert!(
        lines
            .iter()
            .any(|l| l.line_text.contains("out[0] = skb->len;"))
    );
    let relos = &ext.core_relos[0].records;
    assert_eq!(relos.len(), 35);
    assert_eq!(
        (relos[2].insn, relos[2].access.as_str(), relos[2].kind),
        (2, "0:1", CoreReloKind::FieldByteOffset)
    );
    assert_eq!(
        obj.btf.type_name(relos[2].type_id),
        "struct sk_buff___local"
    );
}

#[test]
fn btf_ext_with_larger_records_is_honoured() {
    let obj = load_object("core_fields.o");
    // Re-encode func_info with 12-byte records (an unknown trailing word per record).
    let ext = &obj.ext;
    let mut blob = vec![0x9f, 0xeb, 1, 0];
    let name_off = find_str(&obj.btf.strings, "xdp");
    let recs = &ext.func_info[0].records;
    let mut body = vec![12u32, name_off, recs.len() as u32];
    for r in recs {
        body.extend([r.insn * 8, r.type_id, 0xdead_beef]);
    }
    for w in [24u32, 0, body.len() as u32 * 4, 0, 0] {
        blob.extend(w.to_le_bytes());
    }
    for w in body {
        blob.extend(w.to_le_bytes());
    }
    let parsed = BtfExt::parse(&blob, &obj.btf).expect("parse");
    assert_eq!(parsed.func_info, ext.func_info);
    assert!(parsed.core_relos.is_empty());
    // A record size below the known record is rejected.
    blob[24] = 4;
    assert!(matches!(
        BtfExt::parse(&blob, &obj.btf),
        Err(BtfError::BadExt { .. })
    ));
}

fn find_str(strings: &[u8], s: &str) -> u32 {
    let needle: Vec<u8> = [s.as_bytes(), &[0]].concat();
    (1..strings.len())
        .find(|&i| strings[i - 1] == 0 && strings[i..].starts_with(&needle))
        .unwrap() as u32
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn mutated_btf_never_panics(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8), cut in any::<usize>()) {
        let obj = load_object("core_fields.o");
        for blob in [&obj.raw_btf, &sample(false)] {
            let mut data = blob.clone();
            for &(at, val) in &flips {
                let i = at % data.len();
                data[i] = val;
            }
            let _ = Btf::parse(&data);
            let _ = Btf::parse(&data[..cut % (data.len() + 1)]);
            if let Ok(btf) = Btf::parse(&data) {
                for id in 0..btf.type_count() as u32 {
                    let _ = (btf.type_name(id), btf.size_of(id), btf.skip_mods_and_typedefs(id));
                }
                let _ = btf.kernel_refusal();
                // CO-RE over a corrupted local (and target) BTF must fail cleanly too.
                let mut insns = obj.sections["xdp"].clone();
                let relos = &obj.ext.core_relos[0].records;
                let _ = relocate(&mut insns, relos, &btf, &obj.btf);
                let _ = relocate(&mut insns, relos, &obj.btf, &btf);
            }
        }
        let mut ext = obj.raw_ext.clone();
        for &(at, val) in &flips {
            let i = at % ext.len();
            ext[i] = val;
        }
        let _ = BtfExt::parse(&ext, &obj.btf);
        let _ = BtfExt::parse(&ext[..cut % (ext.len() + 1)], &obj.btf);
    }
}

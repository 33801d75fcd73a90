//! What libbpf does to an object's BTF before loading it into a kernel that lacks some of its
//! kinds or forms (`bpf_object__sanitize_btf`): each unsupported type is rewritten into one the
//! kernel knows, in place, so that every type id (func_info, map key and value types) keeps
//! its meaning. Without it, a kernel older than the BTF refuses the whole blob, libbpf's load
//! would not, and the program would be judged without func_info (every global function
//! verified as a static one).

use super::types::*;

/// The BTF a kernel accepts, as libbpf probes it (each a `BPF_BTF_LOAD` of a tiny blob,
/// [`BtfFeatures::probes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BtfFeatures {
    /// `BTF_KIND_DECL_TAG` (Linux 5.16).
    pub decl_tag: bool,
    /// `BTF_KIND_TYPE_TAG` (5.17).
    pub type_tag: bool,
    /// `BTF_KIND_ENUM64` and signed enums (6.0).
    pub enum64: bool,
    /// `BTF_KIND_FLOAT` (5.13).
    pub float: bool,
    /// `BTF_FUNC_GLOBAL` linkage (5.6).
    pub func_global: bool,
    /// A DATASEC named `?.data...` (libbpf's optional sections, 5.18).
    pub qmark_datasec: bool,
}

/// One feature's probe: a blob that loads exactly when the kernel has it.
pub struct FeatureProbe {
    pub name: &'static str,
    pub btf: Btf,
    set: fn(&mut BtfFeatures, bool),
}

impl FeatureProbe {
    /// Records the probe's answer.
    pub fn record(&self, features: &mut BtfFeatures, loads: bool) {
        (self.set)(features, loads)
    }
}

impl BtfFeatures {
    /// Everything bpfemu models (6.18 and later have it all).
    pub const ALL: BtfFeatures = BtfFeatures {
        decl_tag: true,
        type_tag: true,
        enum64: true,
        float: true,
        func_global: true,
        qmark_datasec: true,
    };

    /// The blobs that decide each feature, for a caller that can load BTF into a kernel.
    pub fn probes() -> Vec<FeatureProbe> {
        let int = || ty("int", int_kind(4, true));
        let var = |name: &str, linkage| ty(name, BtfKind::Var { ty: 1, linkage });
        vec![
            FeatureProbe {
                name: "decl_tag",
                btf: blob(vec![
                    int(),
                    var("x", Linkage::Static),
                    ty(
                        "tag",
                        BtfKind::DeclTag {
                            ty: 2,
                            component_idx: -1,
                        },
                    ),
                ]),
                set: |f, v| f.decl_tag = v,
            },
            FeatureProbe {
                name: "type_tag",
                btf: blob(vec![
                    int(),
                    ty("tag", BtfKind::TypeTag { ty: 1 }),
                    ty("", BtfKind::Ptr { ty: 2 }),
                ]),
                set: |f, v| f.type_tag = v,
            },
            FeatureProbe {
                name: "enum64",
                btf: blob(vec![ty(
                    "e",
                    BtfKind::Enum64 {
                        size: 8,
                        signed: false,
                        values: vec![EnumValue {
                            name: "v".into(),
                            value: 1 << 40,
                        }],
                    },
                )]),
                set: |f, v| f.enum64 = v,
            },
            FeatureProbe {
                name: "float",
                btf: blob(vec![ty("float", BtfKind::Float { size: 4 })]),
                set: |f, v| f.float = v,
            },
            FeatureProbe {
                name: "func_global",
                btf: blob(vec![
                    int(),
                    ty(
                        "",
                        BtfKind::FuncProto {
                            ret: 0,
                            params: vec![Param {
                                name: "a".into(),
                                ty: 1,
                            }],
                        },
                    ),
                    ty(
                        "x",
                        BtfKind::Func {
                            proto: 2,
                            linkage: Linkage::Global,
                        },
                    ),
                ]),
                set: |f, v| f.func_global = v,
            },
            FeatureProbe {
                name: "qmark_datasec",
                btf: blob(vec![
                    int(),
                    var("x", Linkage::Global),
                    ty(
                        "?.data",
                        BtfKind::DataSec {
                            size: 4,
                            vars: vec![VarSecInfo {
                                ty: 2,
                                offset: 0,
                                size: 4,
                            }],
                        },
                    ),
                ]),
                set: |f, v| f.qmark_datasec = v,
            },
        ]
    }
}

fn ty(name: &str, kind: BtfKind) -> BtfType {
    BtfType {
        name: name.to_owned(),
        kind,
    }
}

fn int_kind(size: u32, signed: bool) -> BtfKind {
    BtfKind::Int {
        size,
        encoding: IntEncoding {
            signed,
            ..Default::default()
        },
        bit_offset: 0,
        bits: (size * 8) as u8,
    }
}

/// A blob of `types` after `void`.
fn blob(types: Vec<BtfType>) -> Btf {
    Btf {
        types: std::iter::once(ty("", BtfKind::Void))
            .chain(types)
            .collect(),
        ..Default::default()
    }
}

impl Btf {
    /// This BTF as libbpf would load it into a kernel that has `has`, or `None` when nothing
    /// needs to change. Ids are kept: a rewritten type stays where it was, and the one type
    /// libbpf may add (an `enum64_placeholder` int, the members' type of an ENUM64 made a
    /// union) goes after the last.
    pub fn sanitized_for(&self, has: BtfFeatures) -> Option<Btf> {
        if has == BtfFeatures::ALL {
            return None;
        }
        let mut out = self.clone();
        let mut changed = false;
        let placeholder = out.types.len() as TypeId;
        let mut needs_placeholder = false;
        for t in out.types.iter_mut().skip(1) {
            let rewritten = match &t.kind {
                BtfKind::DeclTag { .. } if !has.decl_tag => Some((
                    t.name.clone(),
                    BtfKind::Int {
                        size: 1,
                        encoding: IntEncoding::default(),
                        bit_offset: 0,
                        bits: 8,
                    },
                )),
                BtfKind::DataSec { size, vars }
                    if !has.qmark_datasec && t.name.starts_with('?') =>
                {
                    let name = format!("_{}", &t.name[1..]);
                    Some((
                        name,
                        BtfKind::DataSec {
                            size: *size,
                            vars: vars.clone(),
                        },
                    ))
                }
                BtfKind::Func {
                    proto,
                    linkage: Linkage::Global,
                } if !has.func_global => Some((
                    t.name.clone(),
                    BtfKind::Func {
                        proto: *proto,
                        linkage: Linkage::Static,
                    },
                )),
                // C has no struct called "float": the stand-in is anonymous.
                BtfKind::Float { size } if !has.float => Some((
                    String::new(),
                    BtfKind::Struct {
                        size: *size,
                        members: Vec::new(),
                    },
                )),
                BtfKind::TypeTag { ty } if !has.type_tag => {
                    Some((String::new(), BtfKind::Const { ty: *ty }))
                }
                BtfKind::Enum { size, values, .. } if !has.enum64 => Some((
                    t.name.clone(),
                    BtfKind::Enum {
                        size: *size,
                        signed: false,
                        values: values.clone(),
                    },
                )),
                BtfKind::Enum64 { size, values, .. } if !has.enum64 => {
                    needs_placeholder = true;
                    let members = values
                        .iter()
                        .map(|v| Member {
                            name: v.name.clone(),
                            ty: placeholder,
                            bit_offset: 0,
                            bitfield_size: 0,
                        })
                        .collect();
                    Some((
                        t.name.clone(),
                        BtfKind::Union {
                            size: *size,
                            members,
                        },
                    ))
                }
                _ => None,
            };
            if let Some((name, kind)) = rewritten {
                changed |= name != t.name || kind != t.kind;
                *t = BtfType { name, kind };
            }
        }
        if needs_placeholder {
            out.types.push(ty(
                "enum64_placeholder",
                BtfKind::Int {
                    size: 1,
                    encoding: IntEncoding::default(),
                    bit_offset: 0,
                    bits: 8,
                },
            ));
        }
        changed.then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn features_without(edit: fn(&mut BtfFeatures)) -> BtfFeatures {
        let mut f = BtfFeatures::ALL;
        edit(&mut f);
        f
    }

    /// A BTF with one type of each kind a kernel may lack.
    fn every_new_kind() -> Btf {
        blob(vec![
            ty("int", int_kind(4, true)),
            ty(
                "",
                BtfKind::FuncProto {
                    ret: 1,
                    params: vec![],
                },
            ),
            ty(
                "f",
                BtfKind::Func {
                    proto: 2,
                    linkage: Linkage::Global,
                },
            ),
            ty(
                "arg:ctx",
                BtfKind::DeclTag {
                    ty: 3,
                    component_idx: 0,
                },
            ),
            ty("percpu", BtfKind::TypeTag { ty: 1 }),
            ty("double", BtfKind::Float { size: 8 }),
            ty(
                "big",
                BtfKind::Enum64 {
                    size: 8,
                    signed: true,
                    values: vec![
                        EnumValue {
                            name: "A".into(),
                            value: 1,
                        },
                        EnumValue {
                            name: "B".into(),
                            value: u64::MAX,
                        },
                    ],
                },
            ),
            ty(
                "small",
                BtfKind::Enum {
                    size: 4,
                    signed: true,
                    values: vec![],
                },
            ),
            ty(
                "?.data.opt",
                BtfKind::DataSec {
                    size: 0,
                    vars: vec![],
                },
            ),
        ])
    }

    #[test]
    fn a_kernel_with_everything_gets_the_btf_as_it_is() {
        assert_eq!(every_new_kind().sanitized_for(BtfFeatures::ALL), None);
    }

    #[test]
    fn a_5_10_kernel_gets_libbpfs_stand_ins_at_the_same_ids() {
        // 5.10 lacks decl tags, type tags, floats and ENUM64, and has the rest.
        let has = BtfFeatures {
            decl_tag: false,
            type_tag: false,
            enum64: false,
            float: false,
            func_global: true,
            qmark_datasec: false,
        };
        let out = every_new_kind().sanitized_for(has).expect("changed");
        let original = every_new_kind();
        assert_eq!(out.types.len(), original.types.len() + 1);
        // Untouched: the int, the prototype, the global function.
        assert_eq!(out.types[..4], original.types[..4]);
        assert_eq!(out.types[4].name, "arg:ctx");
        assert!(matches!(
            out.types[4].kind,
            BtfKind::Int {
                size: 1,
                bits: 8,
                ..
            }
        ));
        assert_eq!(
            out.types[5],
            ty("", BtfKind::Const { ty: 1 }),
            "a type tag becomes an anonymous const of its type"
        );
        assert_eq!(
            out.types[6],
            ty(
                "",
                BtfKind::Struct {
                    size: 8,
                    members: vec![]
                }
            )
        );
        let placeholder = original.types.len() as TypeId;
        let BtfKind::Union { size: 8, members } = &out.types[7].kind else {
            panic!("ENUM64 not a union: {:?}", out.types[7]);
        };
        assert_eq!(out.types[7].name, "big");
        let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["A", "B"]);
        assert!(
            members
                .iter()
                .all(|m| m.ty == placeholder && m.bit_offset == 0)
        );
        assert!(matches!(
            out.types[8].kind,
            BtfKind::Enum { signed: false, .. }
        ));
        assert_eq!(out.types[9].name, "_.data.opt");
        assert_eq!(out.types[placeholder as usize].name, "enum64_placeholder");
    }

    #[test]
    fn only_the_missing_feature_is_rewritten() {
        let out = every_new_kind()
            .sanitized_for(features_without(|f| f.func_global = false))
            .expect("changed");
        let original = every_new_kind();
        for (i, (a, b)) in original.types.iter().zip(&out.types).enumerate() {
            match i {
                3 => assert!(matches!(
                    b.kind,
                    BtfKind::Func {
                        linkage: Linkage::Static,
                        ..
                    }
                )),
                _ => assert_eq!(a, b, "type {i}"),
            }
        }
        assert_eq!(out.types.len(), original.types.len());
    }

    #[test]
    fn every_probe_encodes() {
        let probes = BtfFeatures::probes();
        assert_eq!(probes.len(), 6);
        for p in &probes {
            let bytes = p.btf.to_kernel_bytes().bytes;
            assert!(bytes.len() > 24, "{}", p.name);
            let mut f = BtfFeatures::ALL;
            p.record(&mut f, false);
            assert_ne!(f, BtfFeatures::ALL, "{} records nothing", p.name);
        }
    }
}

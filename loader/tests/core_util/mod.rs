//! Shared by the BTF and CO-RE integration tests: reading test objects and the kernel's BTF.
#![allow(dead_code)]

use bpfemu_isa::RawInsn;
use bpfemu_loader::btf::{Btf, BtfExt};
use object::{Object, ObjectSection};
use std::collections::HashMap;
use std::path::PathBuf;

pub const VMLINUX: &str = "/sys/kernel/btf/vmlinux";

pub fn data_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// A test object: its BTF, BTF.ext and the instructions of each code section.
pub struct TestObject {
    pub btf: Btf,
    pub ext: BtfExt,
    pub raw_btf: Vec<u8>,
    pub raw_ext: Vec<u8>,
    pub sections: HashMap<String, Vec<RawInsn>>,
}

pub fn load_object(name: &str) -> TestObject {
    let bytes = std::fs::read(data_path(name)).expect("test object (run tests/data/build.sh)");
    let file = object::File::parse(&*bytes).expect("ELF");
    let section = |n: &str| {
        file.section_by_name(n)
            .map(|s| s.data().expect("section data").to_vec())
    };
    let raw_btf = section(".BTF").expect(".BTF");
    let raw_ext = section(".BTF.ext").expect(".BTF.ext");
    let btf = Btf::parse(&raw_btf).expect("parse .BTF");
    let ext = BtfExt::parse(&raw_ext, &btf).expect("parse .BTF.ext");
    let sections = file
        .sections()
        .filter(|s| s.kind() == object::SectionKind::Text)
        .map(|s| {
            let insns = RawInsn::parse_all(s.data().expect("code")).expect("whole insns");
            (s.name().expect("name").to_string(), insns)
        })
        .collect();
    TestObject {
        btf,
        ext,
        raw_btf,
        raw_ext,
        sections,
    }
}

/// The running kernel's BTF, or `None` (with a message) when this machine has none.
pub fn vmlinux() -> Option<Btf> {
    match std::fs::read(VMLINUX) {
        Ok(bytes) => Some(Btf::parse(&bytes).expect("parse vmlinux BTF")),
        Err(e) => {
            eprintln!("skipping: {VMLINUX} unavailable: {e}");
            None
        }
    }
}

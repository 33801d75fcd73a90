//! Global variables in the arena address space (`__arena`, section `.addr_space.1`), as
//! libbpf 1.7 places them: in the object's one `BPF_MAP_TYPE_ARENA` map, their `ld_imm64`s
//! turned into `BPF_PSEUDO_MAP_VALUE` loads of the arena at the variable's offset (the
//! kernel makes that the arena's user address plus the offset), their initial bytes copied
//! into the arena once it is created and mapped.
//!
//! Where in the arena they go depends on the kernel: at its end when the kernel takes an
//! `ld_imm64` offset of any size, at its start when it refuses offsets of 512 MiB and more
//! ("direct value offset of N is not allowed", libbpf's `FEAT_LDIMM64_FULL_RANGE_OFF` probe).
//! Linux 6.18 refuses them, so the globals start at offset 0.

use crate::elf::{ElfObject, SHT_NOBITS};
use crate::error::LoadError;
use crate::maps::MapTable;
use bpfemu_isa::uapi::BPF_MAP_TYPE_ARENA;

/// libbpf's `ARENA_SEC`.
pub const ARENA_SECTION: &str = ".addr_space.1";

/// The kernel profile's page size (x86-64): an arena spans `max_entries` pages.
pub const PAGE_SIZE: u64 = 4096;

/// The arena globals of an object: which map holds them, where, and their initial bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArenaGlobals {
    /// Index of the arena map in `Object::maps`.
    pub map: usize,
    /// Byte offset in the arena where the section starts.
    pub offset: u64,
    /// The section's bytes (zeros for a `NOBITS` one).
    pub data: Vec<u8>,
}

/// The arena section and the arena map found for it, as libbpf's
/// `bpf_object__init_user_btf_maps` finds them: only objects with a `.maps` section get one
/// (without, a relocation against an arena variable fails later, naming the instruction).
pub fn find(
    elf: &ElfObject<'_>,
    has_btf_maps: bool,
    table: &mut MapTable,
) -> Result<(), LoadError> {
    let section = elf.sections.iter().find(|s| s.name == ARENA_SECTION);
    table.arena_section = section.map(|s| s.index);
    if !has_btf_maps {
        return Ok(());
    }
    let map = the_arena_map(&elf.file, table)?;
    let Some(section) = section else {
        return Ok(());
    };
    let Some(map) = map else {
        return Err(LoadError::Arena {
            file: elf.file.clone(),
            message: "to use global __arena variables the ARENA map should be explicitly \
                      declared in SEC(\".maps\")"
                .into(),
        });
    };
    let size = if section.sh_type == SHT_NOBITS {
        section.size
    } else {
        section.data.len() as u64
    };
    let arena_size = PAGE_SIZE * table.specs[map].max_entries as u64;
    if round_up_to_page(size) > arena_size {
        return Err(LoadError::Arena {
            file: elf.file.clone(),
            message: format!(
                "declared ARENA map size ({arena_size}) is too small to hold global __arena \
                 variables of size {size}"
            ),
        });
    }
    // Within the arena's size, which the kernel caps at 4 GiB.
    let data = if section.sh_type == SHT_NOBITS {
        vec![0; size as usize]
    } else {
        section.data.to_vec()
    };
    table.arena = Some(ArenaGlobals {
        map,
        offset: 0,
        data,
    });
    Ok(())
}

/// The object's arena map, if any; libbpf supports one.
fn the_arena_map(file: &str, table: &MapTable) -> Result<Option<usize>, LoadError> {
    let mut arenas =
        (table.specs.iter().enumerate()).filter(|(_, m)| m.map_type == BPF_MAP_TYPE_ARENA);
    let first = arenas.next();
    if let (Some((_, first)), Some((_, second))) = (first, arenas.next()) {
        return Err(LoadError::Map {
            file: file.into(),
            map: second.name.clone(),
            message: format!(
                "only single ARENA map is supported (map '{}' is also ARENA)",
                first.name
            ),
        });
    }
    Ok(first.map(|(i, _)| i))
}

fn round_up_to_page(size: u64) -> u64 {
    size.div_ceil(PAGE_SIZE) * PAGE_SIZE
}

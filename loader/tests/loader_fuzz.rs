//! `load_bytes` never panics: real objects with bytes flipped, overwritten or cut off.

use bpfemu_loader::{LoadOptions, load_bytes};
use proptest::prelude::*;
use std::path::Path;

fn seeds() -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = vec![root.join("tests/data/features.o")];
    for name in [
        "subprogs.v3.o",
        "tailcall.v3.o",
        "globals.v3.o",
        "legacy_maps.v3.o",
    ] {
        paths.push(root.join("../examples/xdp/build").join(name));
    }
    paths.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

fn options() -> LoadOptions {
    let mut opts = LoadOptions::default();
    opts.map_sizes.insert("sized".into(), 4);
    opts
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn mutated_objects_never_panic(
        seed in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..16),
        cut in any::<Option<prop::sample::Index>>(),
    ) {
        let seeds = seeds();
        let mut data = seed.get(&seeds).clone();
        for (at, byte) in edits {
            let i = at.index(data.len());
            data[i] = byte;
        }
        if let Some(cut) = cut {
            data.truncate(cut.index(data.len()));
        }
        let _ = load_bytes("mutant.o", &data, &options());
    }

    #[test]
    fn truncated_objects_never_panic(seed in any::<prop::sample::Index>(), len in any::<prop::sample::Index>()) {
        let seeds = seeds();
        let data = seed.get(&seeds);
        let _ = load_bytes("cut.o", &data[..len.index(data.len())], &options());
    }
}

//! Shared by the root package's integration tests: where the example corpus is.

use std::path::{Path, PathBuf};

/// The corpus objects built at `level` (`v2`, `v3`, `v4`) as (program name, path), sorted by
/// name, without the programs named in `skip`.
pub fn corpus(level: &str, skip: &[&str]) -> Vec<(String, PathBuf)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/xdp/build");
    let suffix = format!(".{level}.o");
    let mut objects: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .expect("the corpus is built")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let stem = path
                .file_name()?
                .to_str()?
                .strip_suffix(&suffix)?
                .to_owned();
            (!skip.contains(&stem.as_str())).then_some((stem, path))
        })
        .collect();
    objects.sort();
    objects
}

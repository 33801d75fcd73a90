//! For tests that boot a kernel: its image, or a skip where the machine cannot have it.

use crate::images;
use std::path::PathBuf;

/// Whether a missing kernel fails the test (`BPFEMU_REQUIRE_KERNEL=1`, as CI sets it).
pub fn kernel_required() -> bool {
    std::env::var("BPFEMU_REQUIRE_KERNEL").is_ok_and(|v| v == "1")
}

/// The cached image of kernel `version` (fetched with apt on first use) when QEMU is installed;
/// else None after a skip message naming `test`. Under `BPFEMU_REQUIRE_KERNEL=1` the reason
/// panics instead: a test harness helper, where a panic is the test's failure.
pub fn image_or_skip(test: &str, version: &str) -> Option<PathBuf> {
    let why = match why_unavailable(version) {
        Ok(image) => return Some(image),
        Err(why) => why,
    };
    assert!(
        !kernel_required(),
        "{test}: BPFEMU_REQUIRE_KERNEL=1 but {why}"
    );
    eprintln!("{test}: skipping: {why} (set BPFEMU_REQUIRE_KERNEL=1 to fail)");
    None
}

fn why_unavailable(version: &str) -> Result<PathBuf, String> {
    let qemu = std::process::Command::new(crate::boot::QEMU)
        .arg("--version")
        .output();
    if !qemu.is_ok_and(|o| o.status.success()) {
        return Err("qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)".into());
    }
    let kernel =
        images::kernel(version).ok_or_else(|| format!("no image of kernel {version} is known"))?;
    images::fetch(kernel, &images::cache_dir()).map_err(|e| e.to_string())
}

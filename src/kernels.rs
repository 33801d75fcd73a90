//! `bpfemu kernels`: the kernels bpfemu answers as, and `bpfemu kernels fetch`, which gets a
//! kernel's BTF (for CO-RE, `__ksym` and kfunc checks with `--kernel VERSION`) by booting
//! Debian's image of it under QEMU, once, into the kernel cache.

use anyhow::{Context, Result};
use bpfemu_isa::KernelVersion;
use bpfemu_loader::kernel::profile_btf_path;
use std::fmt::Write;
use std::time::Duration;

/// The file a booted kernel's BTF is read from.
const GUEST_BTF: &str = "/sys/kernel/btf/vmlinux";

/// One line per profile: its version, the Debian package it is checked against, and whether
/// its BTF is at hand (the running kernel's, or fetched into the cache).
pub fn list() -> String {
    let running = KernelVersion::running();
    let mut out = String::new();
    for version in KernelVersion::ALL {
        let btf = profile_btf_path(version);
        let source = match (running == Some(version), btf.is_file()) {
            (true, _) => "running kernel".to_owned(),
            (false, true) => btf.display().to_string(),
            (false, false) => "not fetched (bpfemu kernels fetch)".to_owned(),
        };
        let image = bpfemu_vmkernel::images::kernel(version.name())
            .map_or("the running kernel's", |k| k.package);
        writeln!(out, "{:<5}  {image:<40}  BTF: {source}", version.name()).expect("string");
    }
    out
}

/// Fetches each kernel's image (apt) and boots it to read its BTF into the cache. The
/// running kernel's BTF is already at hand, and a kernel whose BTF is cached is skipped.
pub fn fetch(versions: &[KernelVersion], timeout: Duration) -> Result<String> {
    let init = std::env::current_exe().context("cannot find bpfemu's own executable")?;
    let cache = bpfemu_vmkernel::images::cache_dir();
    let mut out = String::new();
    for &version in versions {
        let dest = profile_btf_path(version);
        if KernelVersion::running() == Some(version) {
            writeln!(
                out,
                "{version}: the running kernel (its BTF is {GUEST_BTF})"
            )?;
            continue;
        }
        if dest.is_file() {
            writeln!(out, "{version}: {} (already fetched)", dest.display())?;
            continue;
        }
        let image = bpfemu_vmkernel::images::kernel(version.name())
            .with_context(|| format!("{version}: no image of it is known"))?;
        let vmlinuz = bpfemu_vmkernel::images::fetch(image, &cache)?;
        let results = bpfemu_vmkernel::Vm::new(&vmlinuz, &init)
            .fetch_file(GUEST_BTF)
            .timeout(timeout)
            .run()
            .with_context(|| format!("{version}: booting {}", vmlinuz.display()))?;
        let btf = match results.files.get(GUEST_BTF) {
            Some(Ok(bytes)) => bytes,
            Some(Err(why)) => anyhow::bail!("{version}: {}: {GUEST_BTF}: {why}", results.release),
            None => anyhow::bail!("{version}: {}: sent no {GUEST_BTF}", results.release),
        };
        let dir = dest.parent().expect("a file in a directory");
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        // Written aside and renamed: a reader never sees half a file.
        let partial = dest.with_extension(format!("btf.{}", std::process::id()));
        std::fs::write(&partial, btf)
            .and_then(|()| std::fs::rename(&partial, &dest))
            .with_context(|| format!("cannot write {}", dest.display()))?;
        writeln!(
            out,
            "{version}: {} from {} ({} bytes, {:.1} s)",
            dest.display(),
            results.release,
            btf.len(),
            results.wall.as_secs_f64()
        )?;
    }
    Ok(out)
}

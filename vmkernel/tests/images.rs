//! The image cache: a package apt does not know is a one-line error naming the package and
//! its suite, and fetching twice gives the same file and leaves no scratch behind.
//!
//! Needs apt-get (and, for the second test, the suites: see scripts/kernel_apt_sources.sh);
//! skipped with a message without them, unless `BPFEMU_REQUIRE_KERNEL=1` (CI).

use bpfemu_vmkernel::images::{self, ImageError, KernelImage, VmlinuzPlace};

fn apt_or_skip(test: &str) -> bool {
    if std::process::Command::new("apt-get")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return true;
    }
    let required = std::env::var("BPFEMU_REQUIRE_KERNEL").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{test}: BPFEMU_REQUIRE_KERNEL=1 but apt-get is missing"
    );
    eprintln!("{test}: skipping: apt-get is missing");
    false
}

/// The shared cache's 6.1 image, or None after a skip message when apt cannot get it (the
/// suites are not in its sources); a failure under `BPFEMU_REQUIRE_KERNEL=1`.
fn shared_image_or_skip(test: &str) -> Option<std::path::PathBuf> {
    if !apt_or_skip(test) {
        return None;
    }
    let kernel = images::kernel("6.1").expect("6.1");
    match images::fetch(kernel, &images::cache_dir()) {
        Ok(path) => Some(path),
        Err(why) => {
            let required = std::env::var("BPFEMU_REQUIRE_KERNEL").is_ok_and(|v| v == "1");
            assert!(!required, "{test}: BPFEMU_REQUIRE_KERNEL=1 but {why}");
            eprintln!("{test}: skipping: {why}");
            None
        }
    }
}

#[test]
fn a_package_in_no_known_suite_names_the_suite() {
    if !apt_or_skip("a_package_in_no_known_suite_names_the_suite") {
        return;
    }
    let unknown = KernelImage {
        version: "0.0",
        release: "0.0.0-bpfemu-test",
        package: "linux-image-0.0.0-bpfemu-test",
        suite: "bpfemu-no-such-suite",
        place: VmlinuzPlace::Boot,
    };
    let cache = std::env::temp_dir().join(format!("vmkernel-images-{}", std::process::id()));
    let error = images::fetch(&unknown, &cache).expect_err("no such package");
    let text = error.to_string();
    assert!(matches!(error, ImageError::SuiteMissing { .. }), "{text}");
    assert_eq!(
        text,
        "linux-image-0.0.0-bpfemu-test: apt cannot find it: the suite bpfemu-no-such-suite is \
         not in apt's sources (see scripts/kernel_apt_sources.sh)"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&cache).unwrap().collect();
    assert!(leftovers.is_empty(), "scratch left behind: {leftovers:?}");
    std::fs::remove_dir_all(&cache).unwrap();
}

#[test]
fn fetching_twice_gives_the_cached_image_and_no_scratch() {
    let test = "fetching_twice_gives_the_cached_image_and_no_scratch";
    let Some(first) = shared_image_or_skip(test) else {
        return;
    };
    let kernel = images::kernel("6.1").expect("6.1");
    let cache = images::cache_dir();
    let modified = std::fs::metadata(&first).unwrap().modified().unwrap();
    let second = images::fetch(kernel, &cache).unwrap();
    assert_eq!(first, second);
    assert_eq!(
        std::fs::metadata(&second).unwrap().modified().unwrap(),
        modified
    );
    // A bzImage: the "HdrS" boot protocol magic at 0x202.
    let image = std::fs::read(&first).unwrap();
    assert_eq!(&image[0x202..0x206], b"HdrS");
    let ours = format!(".{}.{}-", kernel.version, std::process::id());
    let scratch: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(&ours))
        .collect();
    assert!(scratch.is_empty(), "scratch left behind: {scratch:?}");
}

#[test]
fn concurrent_fetches_into_an_empty_cache_both_get_the_whole_image() {
    let test = "concurrent_fetches_into_an_empty_cache_both_get_the_whole_image";
    let Some(shared) = shared_image_or_skip(test) else {
        return;
    };
    let kernel = images::kernel("6.1").expect("6.1");
    let cache = std::env::temp_dir().join(format!("vmkernel-race-{}", std::process::id()));
    let fetchers: Vec<_> = (0..2)
        .map(|_| {
            let cache = cache.clone();
            std::thread::spawn(move || images::fetch(kernel, &cache))
        })
        .collect();
    for fetcher in fetchers {
        let path = fetcher.join().unwrap().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(path, kernel.cached(&cache));
    }
    let image = std::fs::read(kernel.cached(&cache)).unwrap();
    assert_eq!(&image[0x202..0x206], b"HdrS");
    // The same bytes as the shared cache's copy, fetched on its own: nothing truncated.
    assert!(
        image == std::fs::read(&shared).unwrap(),
        "{} differs",
        shared.display()
    );
    let names: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, [format!("vmlinuz-{}", kernel.release)]);
    std::fs::remove_dir_all(&cache).unwrap();
}

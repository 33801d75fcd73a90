//! The first run on a bare machine: the `bpfemu` binary builds with Rust alone (no C library:
//! libbpf, which needs libelf and zlib, is only the tests' judge), and the README says what a
//! new user needs to know before the first command.

#[allow(dead_code)]
mod cli_support;

use cli_support::root;
use std::process::Command;

/// `cargo tree` of the product: the dependencies a `cargo install` builds.
fn product_tree(edges: &str) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "--offline", "--locked", "--prefix", "none"])
        .args(["-p", "bpfemu", "-e", edges])
        .current_dir(root())
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_product_needs_no_c_library() {
    let product = product_tree("normal,build");
    // The tree is the real one: it holds the door to the kernel, for `bpfemu diff`...
    assert!(product.contains("bpfemu-kernel"), "{product}");
    // ...but not the judges (they are the tests' only)...
    assert!(!product.contains("bpfemu-conformance"), "{product}");
    // ...nor libbpf, nor any other crate that builds or links a C library.
    for c_crate in ["libbpf-sys", "libelf", "libz-sys", "cc v", "pkg-config"] {
        assert!(
            !product.lines().any(|l| l.starts_with(c_crate)),
            "the bpfemu binary depends on {c_crate}:\n{product}"
        );
    }
    // The tests still have their judge.
    let with_tests = product_tree("normal,build,dev");
    assert!(with_tests.lines().any(|l| l.starts_with("libbpf-sys")));
}

#[test]
fn the_readme_prepares_the_first_run() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let rust_version = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("the workspace states its Rust version");
    assert!(
        readme.contains(&format!("Rust {rust_version}")),
        "the README does not state Rust {rust_version}"
    );
    let first = readme
        .lines()
        .find(|l| l.starts_with("cargo "))
        .expect("a first command");
    // Cargo shows its progress: a first build takes minutes.
    assert!(!first.contains(" -q"), "{first}");
    // Exactly two set-up commands: the main job, then the tests.
    let block = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a shell block");
    let commands: Vec<&str> = block
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(commands.len(), 2, "{commands:?}");
    assert!(commands[1].contains("scripts/test.sh"), "{commands:?}");
    assert!(readme.contains("cargo install --path ."));
    assert!(readme.contains("on the PATH"));
    assert!(readme.contains("before the kernel's rewrites"));
    assert!(readme.contains("`--xlated` shows them after the verifier's rewrites"));
    assert!(readme.contains("after the replay"));
}

//! `bpfemu verify OBJECT --kernel K,... --csv` read back: what the per-kernel tests
//! (kernel_counts.rs, kernel_verdicts.rs) compare with each kernel's answers.

use bpfemu::verify::table::split_records;
use std::collections::HashMap;
use std::process::Command;

/// Every kernel profile, oldest first.
pub const KERNELS: [&str; 5] = ["5.10", "6.1", "6.12", "6.18", "7.2"];

/// The CSV report of one `verify` run.
pub struct VerifyCsv {
    pub status: Option<i32>,
    /// Standard output and error, for failure messages.
    pub text: String,
    rows: Vec<HashMap<String, String>>,
}

impl VerifyCsv {
    /// The row `pick` chooses (a panic naming `what` when there is none).
    pub fn row(
        &self,
        what: &str,
        pick: impl Fn(&HashMap<String, String>) -> bool,
    ) -> &HashMap<String, String> {
        self.rows
            .iter()
            .find(|r| pick(r))
            .unwrap_or_else(|| panic!("no row for {what}: {}", self.text))
    }
}

/// `verify OBJECT --kernel KERNELS... --csv`, run from the package's root, with the running
/// kernel's BTF for every kernel: these tests hold the profiles' rules (what each kernel lets
/// XDP call, how it walks), which do not depend on whose BTF names a kfunc, and must not
/// depend on which kernels' BTF a machine has fetched (a fresh one has none).
/// tests/kernels_vs_vms.rs judges with each kernel's own BTF.
pub fn verify_csv(object: &str, kernels: &[&str]) -> VerifyCsv {
    let out = Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(["verify", object, "--kernel", &kernels.join(","), "--csv"])
        .args(["--btf", "/sys/kernel/btf/vmlinux"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("bpfemu runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    // The product's own CSV reader (`verify --compare` reads with it).
    let mut records = split_records(&stdout)
        .into_iter()
        .map(|(_, fields)| fields)
        .filter(|fields| !fields.is_empty());
    let header = records.next().unwrap_or_default();
    let rows = records
        .map(|row| header.iter().cloned().zip(row).collect())
        .collect();
    VerifyCsv {
        status: out.status.code(),
        text: stdout + &String::from_utf8_lossy(&out.stderr),
        rows,
    }
}

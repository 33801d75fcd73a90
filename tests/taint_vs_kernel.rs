//! `bpfemu diff` on programs that use random numbers and the clock, against the running kernel:
//! results are left out exactly when they depend on those values (taint tracking in bpfemu's
//! interpreter), said so with the helper call, and everything else is still compared.
//!
//! The object is `tests/objects/random_sampling.o` (source beside it). Skipped with a message
//! when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu::diff::{self, DiffOptions, PacketVerdict, Session};
use bpfemu_kernel::kernel_or_skip;
use std::path::PathBuf;

fn object() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/objects/random_sampling.o")
}

fn session(program: &str, seed: u64) -> Session {
    let mut opts = DiffOptions::new(object());
    opts.program = Some(program.into());
    opts.seed = seed;
    Session::open(&opts).unwrap()
}

/// Packets of the bundled capture (200, IPv4, IPv6, ARP and others).
fn packets() -> Vec<Vec<u8>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/pcap/normal.pcap");
    bpfemu::pcap::PcapReader::open(&path)
        .unwrap()
        .map(|p| p.unwrap().data)
        .collect()
}

/// "Sample 1 in 4": the verdict is random on both sides, so it is never judged, and each
/// packet says which call it depends on; over many sessions with different seeds, no packet is
/// a false mismatch. The packet counter, which does not depend on the draw, is compared.
#[test]
fn sample_one_in_n_gives_no_false_mismatch() {
    if !kernel_or_skip("sample_one_in_n_gives_no_false_mismatch") {
        return;
    }
    let packets = packets();
    let runs: u64 = std::env::var("BPFEMU_TAINT_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let mut differing_verdicts = 0;
    for seed in 0..runs {
        let mut s = session("sample_one_in_four", seed);
        for (i, p) in packets.iter().enumerate() {
            let cmp = s.run_packet(i, p);
            assert!(!cmp.is_mismatch(), "{}", diff::format_packet(&cmp));
            match &cmp.verdict {
                PacketVerdict::NotCompared { reason } => assert!(
                    reason.starts_with("verdict depends on bpf_get_prandom_u32 at insn 10"),
                    "{reason}"
                ),
                other => panic!("packet {i}: {other:?}"),
            }
            if let (diff::Outcome::Ran { retval: k, .. }, diff::Outcome::Ran { retval: b, .. }) =
                (&cmp.kernel, &cmp.bpfemu)
            {
                differing_verdicts += usize::from(k != b);
            }
        }
        let maps = s.compare_maps().unwrap();
        let counts = maps.iter().find(|m| m.name == "counts").unwrap();
        assert!(counts.mismatches.is_empty(), "{counts:?}");
        assert!(counts.not_compared_fields.is_empty(), "{counts:?}");
        assert_eq!(counts.equal_entries, 2);
    }
    // The draws did differ between the sides: the exclusions were needed.
    assert!(differing_verdicts > 0);
}

/// Random numbers and clock readings that do not reach the verdict: every verdict and every
/// untainted byte is compared (equal), the tainted source MAC byte and map fields are left out with
/// their call; a value planted in the kernel's `config` only is then found as a mismatch.
#[test]
fn random_values_beside_the_verdict_leave_it_compared() {
    if !kernel_or_skip("random_values_beside_the_verdict_leave_it_compared") {
        return;
    }
    let packets = packets();
    let mut s = session("random_beside_verdict", 1);
    for (i, p) in packets.iter().take(50).enumerate() {
        let cmp = s.run_packet(i, p);
        assert_eq!(
            cmp.verdict,
            PacketVerdict::Equal,
            "{}",
            diff::format_packet(&cmp)
        );
        assert_eq!(cmp.excluded_offsets, [11], "packet {i}");
        assert_eq!(
            cmp.excluded_because.as_deref(),
            Some("bpf_get_prandom_u32 at insn 4"),
        );
    }
    let maps = s.compare_maps().unwrap();
    let draws = maps.iter().find(|m| m.name == "draws").unwrap();
    assert!(draws.mismatches.is_empty(), "{draws:?}");
    let left_out: Vec<(&str, &str)> = draws
        .not_compared_fields
        .iter()
        .map(|f| (f.field.as_str(), f.reason.as_str()))
        .collect();
    assert_eq!(
        left_out,
        [
            ("random", "depends on bpf_get_prandom_u32 at insn 4"),
            ("when_ns", "depends on bpf_ktime_get_ns at insn 25"),
        ]
    );
    let counts = maps.iter().find(|m| m.name == "counts").unwrap();
    assert!(counts.mismatches.is_empty() && counts.not_compared_fields.is_empty());

    // The kernel alone now drops everything: the difference is found, random part or not.
    let fd = s.kernel_map_fd("config").unwrap();
    bpfemu_kernel::map_update_fd(fd, &0u32.to_ne_bytes(), &1u32.to_ne_bytes(), 0).unwrap();
    let cmp = s.run_packet(50, &packets[50]);
    assert_eq!(
        cmp.verdict,
        PacketVerdict::Mismatch {
            differs: vec!["retval".into()]
        },
        "{}",
        diff::format_packet(&cmp)
    );
    let maps = s.compare_maps().unwrap();
    let config = maps.iter().find(|m| m.name == "config").unwrap();
    assert_eq!(config.mismatches.len(), 1);
}

/// Maps written only on the branch the draw selects: bpfemu's run and the kernel's take
/// different branches, so the kernel's maps may hold writes that bpfemu's run never made,
/// although it never touched those maps. They are left out (their values, and the key set of
/// the map whose keys the other branch inserts) with the call they depend on, whether the
/// pointer comes from code on the branch (`count_one_in_four`) or is held across the draw
/// (`bump_held_one_in_four`); the counter bumped before the draw is still compared, equal.
#[test]
fn writes_on_the_branch_not_taken_give_no_false_mismatch() {
    if !kernel_or_skip("writes_on_the_branch_not_taken_give_no_false_mismatch") {
        return;
    }
    let packets = packets();
    for (program, left_out) in [
        ("count_one_in_four", &["sampled", "sampled_keys"][..]),
        ("bump_held_one_in_four", &["held"][..]),
    ] {
        let mut differing_entries = 0;
        for seed in 0..4 {
            let mut s = session(program, seed);
            // After the first packet (where bpfemu's draw may not take the branch, so its
            // run never touched the maps at all) and after many.
            for (i, p) in packets.iter().enumerate().take(100) {
                let cmp = s.run_packet(i, p);
                assert!(!cmp.is_mismatch(), "{}", diff::format_packet(&cmp));
                if i != 0 && i != 99 {
                    continue;
                }
                for m in s.compare_maps().unwrap() {
                    assert!(m.mismatches.is_empty(), "{program}: {m:?}");
                    let excluded =
                        !m.not_compared_fields.is_empty() || m.not_compared_keys.is_some();
                    let expected = left_out.contains(&m.name.as_str());
                    assert_eq!(
                        excluded, expected,
                        "{program} seed {seed} packet {i}: {m:?}"
                    );
                    for f in &m.not_compared_fields {
                        assert!(
                            f.reason
                                .starts_with("depends on bpf_get_prandom_u32 at insn"),
                            "{program}: {f:?}"
                        );
                        differing_entries += f.entries_differing;
                    }
                    if m.name == "counts" && program == "count_one_in_four" {
                        assert_eq!(m.equal_entries, 2, "{m:?}");
                    }
                }
            }
        }
        // The sides did count differently: the exclusions were needed.
        assert!(differing_entries > 0, "{program}");
    }
}

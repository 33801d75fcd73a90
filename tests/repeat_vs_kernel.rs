//! `XdpRuntime::run_again` against BPF_PROG_TEST_RUN's `repeat`: the kernel builds the
//! `xdp_buff` once and runs the program `repeat` times on it, so a program that moves its
//! bounds or rewrites its packet sees its own output on the next run. `bpfemu bench` compares
//! its engines with the kernel's time on that loop, so bpfemu's loop must do the same work:
//! per engine, one packet loaded then run again `repeat - 1` times, one call each
//! (`run_again`) or all in one (`run_again_repeated`, what the bench times), must end with the
//! kernel's return value and `data_out`.
//!
//! The programs move the frame's bounds or rewrite the packet: l4lb encapsulates (the next
//! run sees an IP-in-IP packet), adjust_meta grows the metadata again on every run,
//! adjust_tail cuts the packet to a snap length (the next run finds it cut). For l4lb and
//! adjust_meta the test also asserts that the last run's outcome differs from the first's for
//! some packet, so that it could not pass with runs that each reload the packet.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu::diff::{DiffOptions, Session};
use bpfemu::jit::Engine;
use bpfemu::pcap::PcapReader;
use bpfemu::replay::{ReplayOptions, Replayer};
use bpfemu_conformance::libbpf::kernel_or_skip;
use bpfemu_kernel::test_run;
use bpfemu_vm::xdp::PacketMeta;
use std::path::{Path, PathBuf};

const REPEAT: u32 = 3;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

struct Case {
    program: &'static str,
    capture: &'static str,
    /// Whether some packet's last run must differ from its first.
    changes_on_repeat: bool,
}

const CASES: &[Case] = &[
    Case {
        program: "l4lb",
        capture: "flows.pcap",
        changes_on_repeat: true,
    },
    Case {
        program: "adjust_tail",
        capture: "normal.pcap",
        // Truncation to a snap length: the next run finds the packet already cut.
        changes_on_repeat: false,
    },
    Case {
        program: "adjust_meta",
        capture: "normal.pcap",
        changes_on_repeat: true,
    },
];

fn maps_file(program: &str) -> Option<PathBuf> {
    let file = root().join(format!("examples/maps/{program}.json"));
    file.exists().then_some(file)
}

fn replayer(object: &Path, maps: Option<PathBuf>, engine: Engine) -> Replayer {
    let opts = ReplayOptions {
        object: object.to_path_buf(),
        maps,
        cpus: 1,
        ifindex: 1,
        engine,
        ..ReplayOptions::default()
    };
    Replayer::new(&opts).expect("the corpus program prepares")
}

/// bpfemu's outcome of `repeat` runs of `packet` on one load: (return value, data_out) of
/// the last, and of the first. The runs after the first go one call each (`run_again`) or
/// all in one (`run_again_repeated`, as test_run's own loop).
fn bpfemu_runs(
    replayer: &mut Replayer,
    packet: &[u8],
    batched: bool,
) -> ((u32, Vec<u8>), (u32, Vec<u8>)) {
    let (program, runtime) = (replayer.program, &mut replayer.runtime);
    let meta = PacketMeta::default();
    let first = runtime
        .run(program, packet, &meta)
        .expect("the first run succeeds");
    let first = (first.retval, first.data_out);
    let last = if batched {
        let verdict = runtime
            .run_again_repeated(program, &meta, u64::from(REPEAT - 1))
            .expect("the runs succeed");
        (verdict.retval, runtime.last_data_out())
    } else {
        let mut last = first.clone();
        for _ in 1..REPEAT {
            let verdict = runtime.run_again(program, &meta).expect("a run succeeds");
            last = (verdict.retval, runtime.last_data_out());
        }
        last
    };
    (last, first)
}

#[test]
fn run_again_repeats_as_test_run_does() {
    if !kernel_or_skip("run_again_repeats_as_test_run_does") {
        return;
    }
    for case in CASES {
        let object = root().join(format!("examples/xdp/build/{}.v3.o", case.program));
        let maps = maps_file(case.program);
        let doc: Option<serde_json::Value> = maps.as_ref().map(|file| {
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).expect("JSON")
        });
        let session = Session::open_with_maps(&DiffOptions::new(&object), doc.as_ref())
            .expect("the kernel loads the program");
        let capture = root().join("examples/pcap").join(case.capture);
        let packets: Vec<Vec<u8>> = PcapReader::open(&capture)
            .unwrap()
            .map(|p| p.unwrap().data)
            .take(40)
            .collect();
        for engine in [
            Engine::Interp,
            Engine::Jit,
            Engine::JitTrusted,
            Engine::JitBaseline,
        ] {
            let mut replayer = replayer(&object, maps.clone(), engine);
            let mut differs = 0;
            for (i, packet) in packets.iter().enumerate() {
                let kernel = test_run(session.kernel_program_fd(), packet, None, REPEAT)
                    .unwrap_or_else(|errno| panic!("{}: packet {i}: errno {errno}", case.program));
                for batched in [false, true] {
                    let (last, first) = bpfemu_runs(&mut replayer, packet, batched);
                    assert_eq!(
                        last,
                        (kernel.retval, kernel.data.clone()),
                        "{} under {} (batched: {batched}): packet {i} after {REPEAT} runs",
                        case.program,
                        engine.name()
                    );
                    differs += usize::from(last != first);
                }
            }
            assert!(
                differs > 0 || !case.changes_on_repeat,
                "{}: no packet's repeated run differs from its first: the case proves nothing",
                case.program
            );
        }
    }
}

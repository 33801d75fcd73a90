// Scratch (not committed): bpfemu's answer as a version on probe files, JSON lines.
#[allow(dead_code)]
#[path = "../tests/common/bpfemu_side.rs"]
mod bpfemu_side;
#[allow(dead_code)]
#[path = "../tests/common/kernel_side.rs"]
mod kernel_side;
#[allow(dead_code)]
#[path = "../tests/common/probe.rs"]
mod probe;
use bpfemu_isa::KernelVersion;
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let version: KernelVersion = args[0].parse().unwrap();
    let kernel =
        bpfemu_loader::Kernel::named(version, Some(bpfemu_loader::kernel::VMLINUX_BTF.into()));
    let mut files: Vec<_> = std::fs::read_dir(&args[1])
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "probes"))
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let rule = f.file_stem().unwrap().to_str().unwrap();
        let Ok(probes) = probe::parse_file(rule, "x", &text) else {
            continue;
        };
        for p in &probes {
            let refused = p.maps.iter().find_map(|m| {
                bpfemu_verifier::profile::maps::creation_refusal(version, m.map_type).map(
                    |(e, _)| format!("map {}: BPF_MAP_CREATE fails with errno {}", m.name, e.0),
                )
            });
            let (acc, err, n) = match refused {
                Some(e) => (false, Some(e), None),
                None => {
                    let v =
                        bpfemu_side::verify_probe(p, &bpfemu_verifier::Options::default(), &kernel);
                    let j = bpfemu_side::judgement(&v);
                    (
                        j.accepted,
                        if j.accepted { None } else { j.message },
                        j.processed,
                    )
                }
            };
            let e = err.map_or("null".to_string(), |e| format!("{:?}", e));
            let n = n.map_or("null".to_string(), |n| n.to_string());
            println!(
                "{{\"name\":{:?},\"accepted\":{acc},\"error\":{e},\"processed_insns\":{n}}}",
                p.name
            );
        }
    }
}

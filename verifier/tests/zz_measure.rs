mod common;
use bpfemu_conformance::kernel::BPF_LOG_STATS;
use bpfemu_conformance::libbpf::{LibbpfObject, LogOptions};
use bpfemu_verifier::{Options, ProgramInput, verify};
use std::path::Path;

fn clean(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| {
            !l.starts_with("verification time")
                && !l.contains(") frame ")
                && !l.contains("live stack update")
        })
        .map(|l| {
            let l = l.trim_end();
            match (l.find("(18) r"), l.find(" = 0x")) {
                (Some(_), Some(at)) => {
                    let rest = &l[at + 5..];
                    let end = rest
                        .find(|c: char| !c.is_ascii_hexdigit())
                        .unwrap_or(rest.len());
                    format!("{} = ADDR {}", &l[..at], rest[end..].trim_start())
                }
                _ => l.to_string(),
            }
        })
        .collect()
}

#[test]
fn measure() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = std::env::var("MEASURE_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or(root.join("examples/xdp/build"));
    let level: u32 = std::env::var("MEASURE_LEVEL")
        .ok()
        .and_then(|l| l.parse().ok())
        .unwrap_or(1);
    let mut objects: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "o"))
        .collect();
    objects.sort();
    let (mut same, mut total) = (0, 0);
    for path in objects {
        let Ok(mut lo) = LibbpfObject::open_file(&path) else {
            continue;
        };
        let out = lo.load(&LogOptions {
            level: level | BPF_LOG_STATS,
            size: 256 << 20,
        });
        let obj = bpfemu_loader::load_file(&path, &Default::default()).unwrap();
        for p in &out.programs {
            let Some(prog) = obj.programs.iter().find(|q| q.name == p.name) else {
                continue;
            };
            let v = verify(
                &ProgramInput::new(&obj, prog),
                &Options {
                    log_level: level | 4,
                    ..Options::default()
                },
            );
            let (k, b) = (clean(&p.log), clean(&v.log));
            if k.is_empty() {
                continue;
            }
            total += 1;
            if k == b {
                same += 1;
                continue;
            }
            let first = k
                .iter()
                .zip(&b)
                .position(|(x, y)| x != y)
                .unwrap_or(k.len().min(b.len()));
            println!(
                "{} {}: {} vs {} lines, first diff at {first}:\n  K {:?}\n  B {:?}",
                path.file_name().unwrap().to_string_lossy(),
                p.name,
                k.len(),
                b.len(),
                k.get(first),
                b.get(first)
            );
            if std::env::var("MEASURE_CTX").is_ok() {
                let lo = first.saturating_sub(6);
                println!(
                    "--- kernel\n{}\n--- bpfemu\n{}",
                    k[lo..(first + 4).min(k.len())].join("\n"),
                    b[lo..(first + 4).min(b.len())].join("\n")
                );
            }
        }
    }
    println!("same logs: {same}/{total}");
}

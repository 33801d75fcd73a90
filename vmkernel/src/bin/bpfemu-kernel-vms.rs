//! Judges BPF objects in other kernels: for each kernel named, boots it once under QEMU with
//! a judge (default: libbpf 1.7's `libbpf_verdicts`) and every object, and writes
//! `OUT/VERSION.jsonl`, one line per program: `object`, `program`, `accepted`, `error`,
//! `processed_insns`; and `OUT/times.tsv`, the wall time of each kernel's VM (of its last
//! boot, when the kernel died before init and was booted again: `boots`).
//!
//!     bpfemu-kernel-vms [--kernels 5.10,6.1,6.12,7.2] [--judge PATH] [--out DIR]
//!                       [--timeout SECONDS] [--btf] [--judge-arg ARG]... OBJECT_OR_DIR...
//!
//! `--btf` also saves each kernel's `/sys/kernel/btf/vmlinux` as `OUT/VERSION.btf`.
//! `--judge-arg` gives the judge an argument after the object's path (`--judge-arg --log2`:
//! `libbpf_verdicts` logs every state at level 2), and the judge's standard error is saved as
//! `OUT/VERSION/N-OBJECT.stderr` (the level-2 logs of the kernel, to read beside bpfemu's). A file
//! named on the command line is given to the judge whatever it holds, under its own name
//! (`--judge probe_verdicts` with `.probes` files); a directory gives its `.o` files.
//!
//! This binary is also the guest's `/init` (it hooks [`guest::run_as_init`]), so the
//! initramfs needs nothing else but the judge. `scripts/kernel_vms.sh` builds and runs it.

use bpfemu_vmkernel::{JobStatus, Vm, guest, images};
use std::path::{Path, PathBuf};
use std::time::Duration;

struct Options {
    kernels: Vec<&'static images::KernelImage>,
    judge: PathBuf,
    out: PathBuf,
    timeout: Duration,
    btf: bool,
    judge_args: Vec<String>,
    objects: Vec<PathBuf>,
}

fn main() {
    if guest::is_init() {
        guest::run_as_init();
    }
    let options = match parse_args(std::env::args().skip(1).collect()) {
        Ok(o) => o,
        Err(why) => {
            eprintln!("bpfemu-kernel-vms: {why}");
            std::process::exit(2);
        }
    };
    if let Err(why) = run(&options) {
        eprintln!("bpfemu-kernel-vms: {why}");
        std::process::exit(1);
    }
}

fn parse_args(args: Vec<String>) -> Result<Options, String> {
    let mut options = Options {
        kernels: images::KERNELS.iter().collect(),
        judge: PathBuf::from("target/debug/examples/libbpf_verdicts"),
        out: PathBuf::from("kernel-vms"),
        timeout: Duration::from_secs(600),
        btf: false,
        judge_args: Vec::new(),
        objects: Vec::new(),
    };
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--kernels" => {
                options.kernels = value("--kernels")?
                    .split(',')
                    .map(|v| {
                        images::kernel(v).ok_or_else(|| {
                            format!("--kernels: no kernel {v} (5.10, 6.1, 6.12 or 7.2)")
                        })
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--btf" => options.btf = true,
            "--judge" => options.judge = PathBuf::from(value("--judge")?),
            "--judge-arg" => options.judge_args.push(value("--judge-arg")?),
            "--out" => options.out = PathBuf::from(value("--out")?),
            "--timeout" => {
                let seconds = value("--timeout")?;
                let seconds: u64 = seconds
                    .parse()
                    .map_err(|_| format!("--timeout: not a number of seconds: {seconds}"))?;
                options.timeout = Duration::from_secs(seconds);
            }
            flag if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
            path => options.objects.extend(objects_at(Path::new(path))?),
        }
    }
    if options.objects.is_empty() {
        return Err("no objects (give .o files or directories of them)".into());
    }
    Ok(options)
}

/// `path` itself, or the `.o` files under the directory `path`, sorted.
fn objects_at(path: &Path) -> Result<Vec<PathBuf>, String> {
    if !path.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let mut found = Vec::new();
    let mut pending = vec![path.to_owned()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries.filter_map(Result::ok) {
            let p = entry.path();
            if p.is_dir() {
                pending.push(p);
            } else if p.extension().is_some_and(|x| x == "o") {
                found.push(p);
            }
        }
    }
    found.sort();
    Ok(found)
}

fn run(options: &Options) -> Result<(), String> {
    let init = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    std::fs::create_dir_all(&options.out).map_err(|e| format!("{}: {e}", options.out.display()))?;
    let cache = images::cache_dir();
    let mut times = String::from("kernel\trelease\tobjects\tprograms\tseconds\tboots\n");
    for kernel in &options.kernels {
        let image = images::fetch(kernel, &cache).map_err(|e| e.to_string())?;
        let mut vm = Vm::new(&image, &init)
            .with_binary("/bin/judge", &options.judge)
            .timeout(options.timeout);
        for (i, object) in options.objects.iter().enumerate() {
            let bytes = std::fs::read(object).map_err(|e| format!("{}: {e}", object.display()))?;
            // The file keeps its name (a probe judge names its probes after the file).
            let name = object
                .file_name()
                .map_or_else(|| format!("{i}.o"), |n| n.to_string_lossy().into_owned());
            let guest_path = format!("/objects/{i}/{name}");
            let mut argv = vec!["/bin/judge".to_owned(), guest_path.clone()];
            argv.extend(options.judge_args.iter().cloned());
            vm = vm.with_file(&guest_path, bytes).job(argv);
        }
        if options.btf {
            vm = vm.fetch_file(BTF);
        }
        let results = vm.run().map_err(|e| e.to_string())?;
        if options.btf {
            save_btf(
                &results,
                &options.out.join(format!("{}.btf", kernel.version)),
            )?;
        }
        let mut lines = String::new();
        for (object, job) in options.objects.iter().zip(&results.jobs) {
            lines.push_str(&verdict_lines(object, job)?);
        }
        if !options.judge_args.is_empty() {
            save_stderr(
                &options.out.join(kernel.version),
                &options.objects,
                &results,
            )?;
        }
        let programs = lines.lines().count();
        let path = options.out.join(format!("{}.jsonl", kernel.version));
        std::fs::write(&path, lines).map_err(|e| format!("{}: {e}", path.display()))?;
        let seconds = results.wall.as_secs_f64();
        eprintln!(
            "{}: {} ({} objects, {programs} programs) in {seconds:.1} s -> {}",
            kernel.version,
            results.release,
            options.objects.len(),
            path.display()
        );
        times.push_str(&format!(
            "{}\t{}\t{}\t{programs}\t{seconds:.2}\t{}\n",
            kernel.version,
            results.release,
            options.objects.len(),
            results.boots
        ));
    }
    let path = options.out.join("times.tsv");
    std::fs::write(&path, times).map_err(|e| format!("{}: {e}", path.display()))
}

const BTF: &str = "/sys/kernel/btf/vmlinux";

/// Each job's standard error as `DIR/N-OBJECT.stderr` (N: the object's place on the command
/// line, as two objects may share a name).
fn save_stderr(
    dir: &Path,
    objects: &[PathBuf],
    results: &bpfemu_vmkernel::Results,
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for (i, (object, job)) in objects.iter().zip(&results.jobs).enumerate() {
        let name = object
            .file_name()
            .map_or_else(|| "object".into(), |n| n.to_string_lossy().into_owned());
        let path = dir.join(format!("{i}-{name}.stderr"));
        std::fs::write(&path, &job.stderr).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

fn save_btf(results: &bpfemu_vmkernel::Results, path: &Path) -> Result<(), String> {
    match results.files.get(BTF) {
        Some(Ok(bytes)) => {
            std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
        }
        Some(Err(why)) => Err(format!(
            "{}: the guest could not read it: {why}",
            results.release
        )),
        None => Err(format!("{}: the guest sent no {BTF}", results.release)),
    }
}

/// The judge's lines for one object, each with `object` added; a judge that failed on the
/// object gives one line saying why.
fn verdict_lines(object: &Path, job: &bpfemu_vmkernel::JobResult) -> Result<String, String> {
    let name = object.display().to_string();
    let stdout = String::from_utf8_lossy(&job.stdout);
    let mut out = String::new();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let mut value: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| format!("{name}: the judge printed a line that is not JSON: {e}"))?;
        if let Some(map) = value.as_object_mut() {
            map.insert("object".into(), name.clone().into());
        }
        out.push_str(&reordered(&value));
        out.push('\n');
    }
    if job.status != JobStatus::Exited(0) || out.is_empty() {
        let why = format!(
            "judge {:?}: {}",
            job.status,
            String::from_utf8_lossy(&job.stderr).trim()
        );
        let line = serde_json::json!({"object": name, "program": null, "accepted": false,
            "error": why, "processed_insns": null});
        out.push_str(&reordered(&line));
        out.push('\n');
    }
    Ok(out)
}

/// `object` first, then the judge's fields in its order.
fn reordered(value: &serde_json::Value) -> String {
    let Some(map) = value.as_object() else {
        return value.to_string();
    };
    let mut fields = vec![format!("\"object\":{}", map["object"])];
    for (key, v) in map.iter().filter(|(k, _)| *k != "object") {
        fields.push(format!("{}:{v}", serde_json::Value::from(key.as_str())));
    }
    format!("{{{}}}", fields.join(","))
}

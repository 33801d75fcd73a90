//! `bpfemu-conformance-plugin`: bpfemu behind bpf_conformance's plugin protocol.
//! See `bpfemu_conformance::plugin` for the protocol.

use std::io::{BufRead, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut line = String::new();
    if let Err(e) = std::io::stdin().lock().read_line(&mut line) {
        println!("cannot read the program from standard input: {e}");
        return ExitCode::from(1);
    }
    let output = bpfemu_conformance::plugin::run(&args, &line);
    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_all(output.stdout.as_bytes())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return ExitCode::from(1);
    }
    ExitCode::from(output.exit_code)
}

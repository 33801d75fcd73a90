//! The kernel's side of `bpfemu test --kernel`: the test's object loaded into the running
//! kernel by `diff`'s [`Session`] (the same maps before, the thread pinned to CPU 0), each
//! packet through `BPF_PROG_TEST_RUN`, the records read from the kernel's rings and the
//! expected map entries looked up in the kernel's maps. test_run names no redirect target
//! and the trace pipe is not read, so those two expectations are bpfemu's alone.

use super::check::{Observed, PacketOut};
use super::spec::Case;
use super::{CaseRun, TestOptions};
use crate::diff::{DiffOptions, Outcome, Session};
use crate::mapio::RawMaps;
use bpfemu_loader::btf::json;

/// What the kernel gave for the test's packets.
pub fn observe(case: &Case, run: &CaseRun, opts: &TestOptions) -> Result<Observed, String> {
    let diff = DiffOptions {
        object: case.object.clone(),
        program: case.program.clone(),
        engine: opts.engine,
        fib: case.fib.clone(),
        sockets: case.sockets.clone(),
        load: opts.load.clone(),
        ..DiffOptions::default()
    };
    let mut session = Session::open_prepared(run.prepared.clone(), &diff, case.maps.as_ref())
        .map_err(|e| e.to_string())?;
    let mut observed = Observed {
        packets: Vec::new(),
        maps: RawMaps::new(),
        records: Vec::new(),
        printk: None,
    };
    for (index, data) in case.packets.iter().enumerate() {
        let cmp = session.run_packet(index, data);
        match cmp.kernel {
            Outcome::Ran { action, data, .. } => {
                // test_run's data_out starts at the metadata, as bpfemu's does.
                let meta = run
                    .meta_lens
                    .get(index)
                    .copied()
                    .unwrap_or(0)
                    .min(data.len());
                observed.packets.push(PacketOut {
                    action,
                    frame: data[meta..].to_vec(),
                    meta: data[..meta].to_vec(),
                    redirect: None,
                });
            }
            // The kernel's refusal is a result (it differs from any action expected), not
            // bad input.
            other => observed.packets.push(PacketOut {
                action: other.describe(),
                frame: Vec::new(),
                meta: Vec::new(),
                redirect: None,
            }),
        }
        if let Some(events) = &cmp.events {
            observed.records.extend(events.kernel.iter().map(|r| {
                let event = crate::replay::Event {
                    map: r.map.clone(),
                    slot: r.slot,
                    data: r.data.clone(),
                };
                event.to_text()
            }));
        }
    }
    if let Some(expected) = &case.expect.maps {
        observed.maps = expected_entries(&session, expected)?;
    }
    Ok(observed)
}

/// The kernel's values of the entries the test expects (absent keys stay absent).
fn expected_entries(session: &Session, expected: &serde_json::Value) -> Result<RawMaps, String> {
    let object = session.object();
    let contents = json::parse_map_contents(expected, &object.maps, object.btf.as_ref())
        .map_err(|e| format!("expect.maps: {e}"))?;
    let mut maps = RawMaps::new();
    for map in &contents {
        let spec = object
            .maps
            .iter()
            .find(|m| m.name == map.name)
            .expect("parsed against them");
        let Some(fd) = session.kernel_map_fd(&map.name) else {
            return Err(format!(
                "map {}: the kernel's program does not use it",
                map.name
            ));
        };
        let len = bpfemu_kernel::sys_value_size(spec.map_type, spec.value_size, session.cpus());
        let entries = maps.entry(map.name.clone()).or_default();
        for entry in &map.entries {
            match bpfemu_kernel::map_lookup_fd(fd, &entry.key, len) {
                Ok(value) => {
                    entries.insert(entry.key.clone(), value);
                }
                Err(2) => {}
                Err(errno) => {
                    return Err(format!("map {}: lookup fails with errno {errno}", map.name));
                }
            }
        }
    }
    Ok(maps)
}

//! Event records in `bpfemu diff`: what a packet's run wrote into ring buffers and perf event
//! arrays, read from the kernel after each test run
//! ([`bpfemu_kernel::events`]) and taken from bpfemu's outcome, compared record
//! by record, byte for byte.
//!
//! Both sides consume their rings after every packet, as a reader does, so ring space and
//! `bpf_ringbuf_query` agree from packet to packet. Each perf event array slot below the CPU
//! count holds an event of the CPU of that number on both sides (bpfemu's slot handle is that
//! CPU), so output into the running CPU's slot is delivered and output into another CPU's
//! slot fails with EOPNOTSUPP on both. A perf sample's bytes come back from the kernel padded
//! (the size word and the bytes end on an 8-byte boundary, the padding left as the ring held
//! it): the kernel's length must be the padded length of bpfemu's, and only bpfemu's length
//! of bytes is compared.

use crate::replay::hex;
use bpfemu_kernel::events::{KernelEvent, PerfRecord, perf_raw_len};
use bpfemu_vm::taint::TaintSource;
use bpfemu_vm::xdp::XdpOutcome;
use serde::Serialize;
use std::fmt::Write as _;

/// One record, on either side.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EventRecord {
    pub map: String,
    /// The perf event array slot; `None` for a ring buffer record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slot: Option<u32>,
    #[serde(serialize_with = "ser_hex")]
    pub data: Vec<u8>,
    /// Samples the kernel's perf ring had no room for (a `PERF_RECORD_LOST`).
    #[serde(skip_serializing_if = "is_zero")]
    pub lost: u64,
}

fn ser_hex<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex(bytes))
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl EventRecord {
    pub fn from_kernel(e: KernelEvent) -> EventRecord {
        let (data, lost) = match e.record {
            PerfRecord::Sample(data) => (data, 0),
            PerfRecord::Lost(n) => (Vec::new(), n),
        };
        EventRecord {
            map: e.map,
            slot: e.slot,
            data,
            lost,
        }
    }

    /// Whether the kernel's record `self` is bpfemu's `ours` (a perf sample's padding aside).
    fn matches(&self, ours: &EventRecord) -> bool {
        if self.map != ours.map || self.slot != ours.slot || self.lost != ours.lost {
            return false;
        }
        match self.slot {
            None => self.data == ours.data,
            Some(_) => {
                self.data.len() == perf_raw_len(ours.data.len())
                    && self.data[..ours.data.len()] == ours.data[..]
            }
        }
    }
}

/// bpfemu's records of one run: ring buffer records, then perf samples, each in order.
pub fn bpfemu_records(o: &XdpOutcome) -> Vec<EventRecord> {
    let ring = o.ring_events.iter().map(|e| EventRecord {
        map: e.map.clone(),
        slot: None,
        data: e.data.clone(),
        lost: 0,
    });
    let perf = o.perf_events.iter().map(|e| EventRecord {
        map: e.map.clone(),
        slot: Some(e.slot),
        data: e.data.clone(),
        lost: 0,
    });
    ring.chain(perf).collect()
}

/// How one packet's records compared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EventComparison {
    pub kernel: Vec<EventRecord>,
    pub bpfemu: Vec<EventRecord>,
    /// The records differ.
    pub differ: bool,
    /// bpfemu's records depend on the clock or random numbers: not judged.
    pub not_compared: bool,
    /// What they depend on (`bpf_get_prandom_u32 at insn 4`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<String>,
}

impl EventComparison {
    /// Compares the kernel's records with bpfemu's; `taint` is what bpfemu's records depend on
    /// (taint tracking, see the module docs of [`super`]), `None`: nothing the kernel does not
    /// reproduce.
    pub fn new(
        kernel: Vec<EventRecord>,
        bpfemu: Vec<EventRecord>,
        taint: Option<TaintSource>,
    ) -> EventComparison {
        let equal =
            kernel.len() == bpfemu.len() && kernel.iter().zip(&bpfemu).all(|(k, b)| k.matches(b));
        EventComparison {
            differ: !equal && taint.is_none(),
            not_compared: !equal && taint.is_some(),
            depends_on: taint.map(|t| t.to_string()),
            kernel,
            bpfemu,
        }
    }

    /// Whether there is anything to show: records on either side.
    pub fn is_empty(&self) -> bool {
        self.kernel.is_empty() && self.bpfemu.is_empty()
    }

    /// The lines printed under a packet whose records differ or were not judged.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        if self.not_compared {
            writeln!(
                out,
                "  events not compared: bpfemu's records depend on {}",
                self.depends_on
                    .as_deref()
                    .unwrap_or("the clock or random numbers")
            )
            .expect("string");
        }
        for (side, records) in [("kernel", &self.kernel), ("bpfemu", &self.bpfemu)] {
            writeln!(out, "  {side} events: {}", records.len()).expect("string");
            for r in records {
                writeln!(out, "    {}", show_record(r)).expect("string");
            }
        }
        out
    }
}

/// `MAP[SLOT] HEX`, or the count of samples the kernel lost.
pub fn show_record(r: &EventRecord) -> String {
    let place = match r.slot {
        Some(slot) => format!("{}[{slot}]", r.map),
        None => r.map.clone(),
    };
    if r.lost != 0 {
        return format!("{place}: {} sample(s) lost", r.lost);
    }
    format!("{place} {}", hex(&r.data))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(slot: Option<u32>, data: &[u8]) -> EventRecord {
        EventRecord {
            map: "events".into(),
            slot,
            data: data.to_vec(),
            lost: 0,
        }
    }

    #[test]
    fn perf_samples_compare_without_the_kernels_padding() {
        let kernel = rec(
            Some(0),
            &[1, 2, 3, 4, 5, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x11],
        );
        assert!(kernel.matches(&rec(Some(0), &[1, 2, 3, 4, 5])));
        assert!(!kernel.matches(&rec(Some(0), &[1, 2, 3, 4, 6])));
        // 13 bytes would be padded to 20, not 12.
        assert!(!kernel.matches(&rec(Some(0), &[1; 13])));
        assert!(!kernel.matches(&rec(Some(1), &[1, 2, 3, 4, 5])));
        // Ring buffer records are exact.
        assert!(!rec(None, &[1, 2, 0]).matches(&rec(None, &[1, 2])));
    }

    #[test]
    fn records_that_depend_on_taint_are_not_judged() {
        let k = vec![rec(None, &[1])];
        let b = vec![rec(None, &[2])];
        let cmp = EventComparison::new(k.clone(), b.clone(), None);
        assert!(cmp.differ && !cmp.not_compared);
        let random = TaintSource {
            helper: 7,
            prog: 0,
            pc: 3,
        };
        let cmp = EventComparison::new(k, b.clone(), Some(random));
        assert!(!cmp.differ && cmp.not_compared);
        assert!(
            cmp.describe()
                .contains("depend on bpf_get_prandom_u32 at insn 3")
        );
        let cmp = EventComparison::new(b.clone(), b, Some(random));
        assert!(!cmp.differ && !cmp.not_compared);
    }
}

//! Packets compared: each side's outcome (verdict, bytes, redirect target, records) and the
//! hex diff of a mismatch.

use super::*;

// ---------------------------------------------------------------------------------------------
// Packets

/// What one side did with a packet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// The program ran: its return value and test_run's `data_out`.
    Ran {
        retval: u32,
        action: String,
        #[serde(serialize_with = "ser_hex")]
        data: Vec<u8>,
    },
    /// BPF_PROG_TEST_RUN refused the packet (or bpfemu refused it as the kernel would).
    Refused { errno: i32, error: String },
    /// bpfemu's run stopped (a fault, the instruction budget): never a kernel outcome.
    Stopped { error: String },
}

impl Outcome {
    fn from_kernel(r: Result<TestRunOutput, i32>) -> Outcome {
        match r {
            Ok(o) => Outcome::Ran {
                retval: o.retval,
                action: XdpAction::from_retval(o.retval).name().into_owned(),
                data: o.data,
            },
            Err(errno) => Outcome::Refused {
                errno,
                error: Errno(errno).to_string(),
            },
        }
    }

    fn from_bpfemu(r: Result<XdpOutcome, PacketError>) -> Outcome {
        match r {
            Ok(o) => Outcome::Ran {
                retval: o.retval,
                action: XdpAction::from_retval(o.retval).name().into_owned(),
                data: o.data_out,
            },
            Err(PacketError::Refused { errno, reason }) => Outcome::Refused {
                errno: errno.0,
                error: format!("{errno}: {reason}"),
            },
            Err(e @ PacketError::Run { .. }) => Outcome::Stopped {
                error: e.to_string(),
            },
        }
    }

    /// A short description: `pass (retval 2), 60 bytes`.
    pub fn describe(&self) -> String {
        match self {
            Outcome::Ran {
                retval,
                action,
                data,
            } => {
                format!("{action} (retval {retval}), {} bytes", data.len())
            }
            Outcome::Refused { error, .. } => format!("refused: {error}"),
            Outcome::Stopped { error } => format!("stopped: {error}"),
        }
    }
}

/// How one packet compared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum PacketVerdict {
    Equal,
    Mismatch {
        /// Which parts differ: `retval`, `data`, `errno`, `outcome`.
        differs: Vec<String>,
    },
    /// The return value (or the packet's bounds) depends on the clock or random numbers:
    /// listed with the call it depends on, not judged; the rest of the result was equal.
    NotCompared {
        reason: String,
    },
}

/// One packet through both sides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PacketComparison {
    pub index: usize,
    pub kernel: Outcome,
    pub bpfemu: Outcome,
    #[serde(flatten)]
    pub verdict: PacketVerdict,
    /// Offsets of `data_out` left out of the comparison because they depend on the clock or
    /// random numbers (see the module docs); empty for most packets.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub excluded_offsets: Vec<usize>,
    /// The ring buffer and perf event records of the run, on both sides (`None` when neither
    /// side emitted any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<EventComparison>,
    /// What the excluded bytes depend on (`bpf_ktime_get_ns at insn 7`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excluded_because: Option<String>,
}

impl PacketComparison {
    pub fn is_mismatch(&self) -> bool {
        matches!(self.verdict, PacketVerdict::Mismatch { .. })
    }

    /// Whether it is worth printing: a mismatch, a packet not compared, excluded bytes or
    /// records not judged.
    pub fn is_notable(&self) -> bool {
        self.verdict != PacketVerdict::Equal
            || !self.excluded_offsets.is_empty()
            || self.events.as_ref().is_some_and(|e| e.not_compared)
    }

    /// Adds the comparison of the run's event records: differing records make the packet a
    /// mismatch (`events` among what differs).
    pub fn add_events(&mut self, events: EventComparison) {
        if events.is_empty() {
            return;
        }
        if events.differ {
            match &mut self.verdict {
                PacketVerdict::Equal => {
                    self.verdict = PacketVerdict::Mismatch {
                        differs: vec!["events".into()],
                    }
                }
                PacketVerdict::Mismatch { differs } => differs.push("events".into()),
                PacketVerdict::NotCompared { .. } => {}
            }
        }
        self.events = Some(events);
    }
}

/// Compares the kernel's and bpfemu's results for one packet; `taint` says what bpfemu's
/// results depend on (`None`: the object reads neither the clock nor random numbers).
pub fn compare_packet(
    index: usize,
    kernel: Result<TestRunOutput, i32>,
    ours: Result<XdpOutcome, PacketError>,
    taint: Option<&PacketTaint>,
) -> PacketComparison {
    let kernel = Outcome::from_kernel(kernel);
    let bpfemu = Outcome::from_bpfemu(ours);
    compare_outcomes(index, kernel, bpfemu, taint)
}

/// [`compare_packet`] on outcomes already converted: what depends on taint is left out and
/// said so, everything else is judged.
pub fn compare_outcomes(
    index: usize,
    kernel: Outcome,
    bpfemu: Outcome,
    taint: Option<&PacketTaint>,
) -> PacketComparison {
    let mut excluded_offsets = Vec::new();
    let mut excluded_because = None;
    let verdict = match (&kernel, &bpfemu) {
        (
            Outcome::Ran {
                retval: kr,
                data: kd,
                ..
            },
            Outcome::Ran {
                retval: br,
                data: bd,
                ..
            },
        ) => {
            let (verdict_taint, bounds_taint) =
                taint.map_or((None, None), |t| (t.verdict, t.bounds));
            if bounds_taint.is_none()
                && let Some(t) = taint
            {
                excluded_offsets = (0..bd.len())
                    .filter(|&i| t.bytes.get(i).copied().flatten().is_some())
                    .collect();
                let mut sources: Vec<String> = excluded_offsets
                    .iter()
                    .filter_map(|&i| t.bytes[i].map(|s| s.to_string()))
                    .collect();
                sources.dedup();
                excluded_because = (!sources.is_empty()).then(|| sources.join(", "));
            }
            let mut differs = Vec::new();
            if verdict_taint.is_none() && kr != br {
                differs.push("retval".to_owned());
            }
            let data_equal = kd.len() == bd.len()
                && (0..kd.len())
                    .all(|i| kd[i] == bd[i] || excluded_offsets.binary_search(&i).is_ok());
            if bounds_taint.is_none() && !data_equal {
                differs.push("data".to_owned());
            }
            let mut left_out = Vec::new();
            if let Some(t) = verdict_taint {
                left_out.push(format!("verdict depends on {t}"));
            }
            if let Some(t) = bounds_taint {
                left_out.push(format!("packet bounds (and bytes) depend on {t}"));
            }
            if !differs.is_empty() {
                PacketVerdict::Mismatch { differs }
            } else if !left_out.is_empty() {
                PacketVerdict::NotCompared {
                    reason: left_out.join("; "),
                }
            } else {
                PacketVerdict::Equal
            }
        }
        (Outcome::Refused { errno: a, .. }, Outcome::Refused { errno: b, .. }) => {
            if a == b {
                PacketVerdict::Equal
            } else {
                PacketVerdict::Mismatch {
                    differs: vec!["errno".into()],
                }
            }
        }
        _ => PacketVerdict::Mismatch {
            differs: vec!["outcome".into()],
        },
    };
    PacketComparison {
        index,
        kernel,
        bpfemu,
        verdict,
        excluded_offsets,
        events: None,
        excluded_because,
    }
}

/// Bytes of context shown on each side of the first difference.
pub(super) const HEX_CONTEXT: usize = 8;

/// A hex diff of two byte strings around their first difference: `None` when equal.
///
/// ```
/// let text = bpfemu::diff::hex_diff(&[1, 2, 3, 4], &[1, 2, 9, 4]).unwrap();
/// assert!(text.contains("first difference at offset 2 (0x2)"));
/// assert!(text.contains("[03]") && text.contains("[09]"));
/// ```
pub fn hex_diff(kernel: &[u8], ours: &[u8]) -> Option<String> {
    let first = (0..kernel.len().max(ours.len())).find(|&i| kernel.get(i) != ours.get(i))?;
    let differing = (0..kernel.len().max(ours.len()))
        .filter(|&i| kernel.get(i) != ours.get(i))
        .count();
    let start = first.saturating_sub(HEX_CONTEXT);
    let end = (first + HEX_CONTEXT + 1).min(kernel.len().max(ours.len()));
    let line = |bytes: &[u8]| {
        let mut s = format!("{start:#06x}:");
        for i in start..end {
            let b = bytes.get(i).map_or("--".to_owned(), |b| format!("{b:02x}"));
            if i == first {
                write!(s, " [{b}]").expect("string");
            } else {
                write!(s, " {b}").expect("string");
            }
        }
        s
    };
    let mut out = format!(
        "first difference at offset {first} ({first:#x}); {differing} byte(s) differ; lengths: kernel {}, bpfemu {}\n",
        kernel.len(),
        ours.len()
    );
    writeln!(out, "    kernel {}", line(kernel)).expect("string");
    writeln!(out, "    bpfemu {}", line(ours)).expect("string");
    Some(out)
}

/// The text printed for a notable packet (several lines, ending with a newline).
pub fn format_packet(cmp: &PacketComparison) -> String {
    let mut out = String::new();
    let head = match &cmp.verdict {
        PacketVerdict::Equal => "equal".to_owned(),
        PacketVerdict::Mismatch { differs } => format!("MISMATCH ({})", differs.join(", ")),
        PacketVerdict::NotCompared { reason } => format!("not compared: {reason}"),
    };
    writeln!(out, "packet {}: {head}", cmp.index).expect("string");
    writeln!(out, "  kernel: {}", cmp.kernel.describe()).expect("string");
    writeln!(out, "  bpfemu: {}", cmp.bpfemu.describe()).expect("string");
    if let (Outcome::Ran { data: k, .. }, Outcome::Ran { data: b, .. }) = (&cmp.kernel, &cmp.bpfemu)
        && let Some(diff) = hex_diff(k, b)
    {
        write!(out, "  data: {diff}").expect("string");
    }
    if !cmp.excluded_offsets.is_empty() {
        writeln!(
            out,
            "  not compared (bytes that depend on {}): offsets {:?}",
            cmp.excluded_because
                .as_deref()
                .unwrap_or("the clock or random numbers"),
            cmp.excluded_offsets
        )
        .expect("string");
    }
    if let Some(events) = cmp.events.as_ref().filter(|e| e.differ || e.not_compared) {
        out.push_str(&events.describe());
    }
    out
}

pub(super) fn ser_hex<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex(bytes))
}

pub(super) fn ser_opt_hex<S: serde::Serializer>(
    bytes: &Option<Vec<u8>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match bytes {
        Some(b) => s.serialize_str(&hex(b)),
        None => s.serialize_none(),
    }
}

//! Random structured programs judged by the running kernel: packet parsing with bounds checks
//! right and wrong, map lookups with and without null checks, arithmetic on scalars feeding
//! memory offsets, branches on derived values, loops (bounded, `may_goto`, open-coded
//! iterators), spills, helper, kfunc and bpf-to-bpf calls. Each
//! program goes to the kernel and to bpfemu's verifier; verdict and final error line must be
//! equal. Every program bpfemu accepts also runs in the checked interpreter on random packets
//! and map contents without a fault.
//!
//! CI runs `BPFEMU_RANDOM_PROGRAMS` (default 1500) programs from `BPFEMU_RANDOM_SEED` (default
//! 1); their disagreements are listed in `verifier/probes/KNOWN_DIFFERENCES` as
//! `random/SEED-INDEX` and honoured both ways. Run more locally, e.g.
//! `BPFEMU_RANDOM_PROGRAMS=50000 BPFEMU_RANDOM_SEED=7`: a disagreement is minimised (blocks
//! dropped while it persists) and printed in the probe format, ready to be kept as a probe.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

mod common;

use bpfemu_loader::Kernel;
use bpfemu_verifier::Options;
use common::kernel_side::{self, Judgement};
use common::report::Tally;
use common::soundness::{self, Rng};
use common::{bpfemu_side, known, probe};
use std::collections::BTreeMap;

/// The maps every random program may use.
const MAPS: &str = "; map values: array key 4 value 16 entries 4\n\
                    ; map table: hash key 4 value 16 entries 16\n";

/// One self-contained piece of a program (labels carry the block's number).
#[derive(Clone, Debug)]
struct Block {
    text: String,
    /// Whether it calls the shared subprogram `sub`.
    calls_sub: bool,
}

/// Builds random blocks; `k` numbers labels.
struct Generator {
    rng: Rng,
}

impl Generator {
    fn size(&mut self) -> (&'static str, i64) {
        *self
            .rng
            .pick(&[("u8", 1), ("u16", 2), ("u32", 4), ("u64", 8)])
    }

    /// A small number near `n`: the off-by-one neighbourhood where bounds checks go wrong.
    fn near(&mut self, n: i64) -> i64 {
        n + self.rng.below(3) as i64 - 1
    }

    fn block(&mut self, k: usize) -> Block {
        let text = match self.rng.below(10) {
            9 => self.kfunc_calls(k),
            0 => self.packet_read(k),
            1 => self.packet_variable_read(k),
            2 | 3 => self.map_access(k),
            4 => self.arithmetic(),
            5 => self.derived_branch(k),
            6 => self.bounded_loop(k),
            7 => self.spill_fill(),
            _ => {
                if self.rng.chance(50) {
                    return Block {
                        text: "r1 = r9\ncall sub\nr9 = r0\n".into(),
                        calls_sub: true,
                    };
                }
                self.helper_call()
            }
        };
        Block {
            text,
            calls_sub: false,
        }
    }

    fn packet_read(&mut self, k: usize) -> String {
        let (size, width) = self.size();
        let off = self.rng.below(24) as i64;
        let checked = self.near(off + width);
        let check = match self.rng.below(6) {
            0 | 1 => format!("if r2 > r8 goto skip{k}"),
            2 => format!("if r8 < r2 goto skip{k}"),
            3 => format!("if r2 >= r8 goto skip{k}"),
            4 => format!("if r2 s> r8 goto skip{k}"),
            _ => format!("if r2 != r8 goto skip{k}"),
        };
        let access = if self.rng.chance(70) {
            format!("r9 = *({size} *)(r7 +{off})")
        } else {
            format!("*({size} *)(r7 +{off}) = r9")
        };
        format!("r2 = r7\nr2 += {checked}\n{check}\n{access}\nskip{k}:\n")
    }

    fn packet_variable_read(&mut self, k: usize) -> String {
        let (size, width) = self.size();
        let mask = *self
            .rng
            .pick(&["0x7", "0x3f", "0xff", "0xffff", "0x7fffffff"]);
        let checked = self.near(width);
        format!(
            "r2 = r7\nr2 += 1\nif r2 > r8 goto skip{k}\nr3 = *(u8 *)(r7 +0)\nr3 &= {mask}\n\
             r2 = r7\nr2 += r3\nr4 = r2\nr4 += {checked}\nif r4 > r8 goto skip{k}\n\
             r9 = *({size} *)(r2 +0)\nskip{k}:\n"
        )
    }

    fn map_access(&mut self, k: usize) -> String {
        let map = *self.rng.pick(&["values", "table"]);
        let key = match self.rng.below(5) {
            0 => "*(u32 *)(r10 -4) = r9\n".to_owned(),
            1 => String::new(),
            _ => format!("*(u32 *)(r10 -4) = {}\n", self.rng.below(6)),
        };
        let null_check = if self.rng.chance(80) {
            format!("if r0 == 0 goto skip{k}\n")
        } else {
            String::new()
        };
        let (size, width) = self.size();
        let offset = if self.rng.chance(35) {
            let mask = *self.rng.pick(&["3", "7", "8", "15"]);
            format!("r3 = r9\nr3 &= {mask}\nr0 += r3\n")
        } else {
            String::new()
        };
        let off = self.near(16 - width).max(-1);
        let access = if self.rng.chance(60) {
            format!("r9 = *({size} *)(r0 {off:+})\n")
        } else {
            format!("*({size} *)(r0 {off:+}) = r9\n")
        };
        format!(
            "{key}r2 = r10\nr2 += -4\nr1 = map[{map}]\ncall bpf_map_lookup_elem\n{null_check}\
             {offset}{access}skip{k}:\n"
        )
    }

    fn arithmetic(&mut self) -> String {
        let mut out = String::new();
        for _ in 0..1 + self.rng.below(3) {
            let c = *self
                .rng
                .pick(&[0, 1, 3, 7, 8, 15, 16, 31, 32, 63, 255, -1, -8]);
            let shift = self.rng.below(64);
            let op = match self.rng.below(14) {
                0 => format!("r9 &= {c}"),
                1 => format!("r9 >>= {shift}"),
                2 => format!("r9 <<= {shift}"),
                3 => format!("r9 += {c}"),
                4 => format!("r9 -= {c}"),
                5 => format!("r9 *= {c}"),
                6 => format!("w9 += {c}"),
                7 => format!("r9 |= {c}"),
                8 => format!("r9 %= {}", c.max(1)),
                9 => "r9 = -r9".to_owned(),
                10 => format!("r9 s>>= {shift}"),
                11 => "r9 = *(u32 *)(r6 +16)".to_owned(),
                12 => "r9 = (s8)r9".to_owned(),
                _ => format!("w9 &= {c}"),
            };
            out.push_str(&op);
            out.push('\n');
        }
        out
    }

    fn derived_branch(&mut self, k: usize) -> String {
        let c = *self.rng.pick(&[0, 1, 7, 8, 12, 15, 16, -1]);
        let cond = match self.rng.below(8) {
            0 => format!("if r9 > {c} goto skip{k}"),
            1 => format!("if r9 >= {c} goto skip{k}"),
            2 => format!("if r9 s> {c} goto skip{k}"),
            3 => format!("if w9 > {c} goto skip{k}"),
            4 => format!("if r9 & {c} goto skip{k}"),
            5 => format!("if r9 != {c} goto skip{k}"),
            6 => format!("if r9 s< {c} goto skip{k}"),
            _ => format!("if w9 s> {c} goto skip{k}"),
        };
        let (size, _) = self.size();
        format!(
            "{cond}\n*(u32 *)(r10 -4) = 0\nr2 = r10\nr2 += -4\nr1 = map[values]\n\
             call bpf_map_lookup_elem\nif r0 == 0 goto skip{k}\nr0 += r9\n\
             r1 = *({size} *)(r0 +0)\nskip{k}:\n"
        )
    }

    fn bounded_loop(&mut self, k: usize) -> String {
        let bound = 1 + self.rng.below(24);
        if self.rng.chance(25) {
            return self.iterator_loop(k, bound);
        }
        if self.rng.chance(25) {
            return format!(
                "r1 = 0\nloop{k}:\nmay_goto skip{k}\nr1 += 1\nr9 += r1\nif r1 < {bound} goto loop{k}\n\
                 skip{k}:\n"
            );
        }
        let step = *self.rng.pick(&[1, 1, 2, 0]);
        format!(
            "r3 = 0\n*(u64 *)(r10 -24) = r3\n*(u64 *)(r10 -16) = r3\nr1 = 0\nloop{k}:\n\
             r2 = r10\nr2 += -24\nr2 += r1\nr3 = *(u8 *)(r2 +0)\nr1 += {step}\n\
             if r1 < {bound} goto loop{k}\n"
        )
    }

    /// A loop over an open-coded numeric iterator at fp-48 whose element feeds a sum or a
    /// stack index (checked or not); sometimes the iterator is not destroyed (a leak).
    fn iterator_loop(&mut self, k: usize, bound: u64) -> String {
        let body = match self.rng.below(4) {
            0 => "r9 += r1\n".to_owned(),
            1 => format!(
                "if r1 > {} goto loop{k}\nr2 = r10\nr2 += -24\nr2 += r1\nr3 = *(u8 *)(r2 +0)\n",
                self.near(7)
            ),
            2 => "r2 = r10\nr2 += -24\nr2 += r1\nr3 = *(u8 *)(r2 +0)\n".to_owned(),
            _ => "r9 = r1\n".to_owned(),
        };
        let destroy = if self.rng.chance(90) {
            "r1 = r10\nr1 += -48\ncall kfunc[bpf_iter_num_destroy]\n"
        } else {
            ""
        };
        format!(
            "r3 = 0\n*(u64 *)(r10 -24) = r3\nr1 = r10\nr1 += -48\nr2 = 0\nr3 = {bound}\n\
             call kfunc[bpf_iter_num_new]\nloop{k}:\nr1 = r10\nr1 += -48\n\
             call kfunc[bpf_iter_num_next]\nif r0 == 0 goto done{k}\nr1 = *(u32 *)(r0 +0)\n\
             {body}goto loop{k}\ndone{k}:\n{destroy}"
        )
    }

    /// kfuncs with rules of their own: a task reference (its NULL check, a field read and its
    /// release each sometimes left out), an RCU section (sometimes left open), an XDP dynptr
    /// at fp-64 and its size, a string kfunc whose arguments are not checked.
    fn kfunc_calls(&mut self, k: usize) -> String {
        match self.rng.below(4) {
            0 => {
                let check = if self.rng.chance(85) {
                    format!("if r0 == 0 goto skip{k}\n")
                } else {
                    String::new()
                };
                let read = if self.rng.chance(50) {
                    let off = *self.rng.pick(&[0, 8, 1000, 4000]);
                    format!("r2 = *(u32 *)(r0 +{off})\nr9 += r2\n")
                } else {
                    String::new()
                };
                let release = if self.rng.chance(85) {
                    "r1 = r0\ncall kfunc[bpf_task_release]\n"
                } else {
                    ""
                };
                format!("r1 = 1\ncall kfunc[bpf_task_from_pid]\n{check}{read}{release}skip{k}:\n")
            }
            1 => {
                let body = if self.rng.chance(50) {
                    "r9 += 1\n"
                } else {
                    "call bpf_get_prandom_u32\nr9 = r0\n"
                };
                let unlock = if self.rng.chance(85) {
                    "call kfunc[bpf_rcu_read_unlock]\n"
                } else {
                    ""
                };
                format!("call kfunc[bpf_rcu_read_lock]\n{body}{unlock}")
            }
            2 => "r1 = r6\nr2 = 0\nr3 = r10\nr3 += -64\ncall kfunc[bpf_dynptr_from_xdp]\n\
                  r1 = r10\nr1 += -64\ncall kfunc[bpf_dynptr_size]\nr9 += r0\n"
                .to_owned(),
            _ => {
                let arg = *self
                    .rng
                    .pick(&["r1 = r10\nr1 += -24\n", "r1 = r7\n", "r1 = r9\n"]);
                format!("{arg}call kfunc[bpf_strlen]\nr9 += r0\n")
            }
        }
    }

    fn spill_fill(&mut self) -> String {
        let (store, load) = *self.rng.pick(&[
            ("u64", "u64"),
            ("u32", "u32"),
            ("u64", "u32"),
            ("u32", "u64"),
            ("u8", "u8"),
        ]);
        let slot = *self.rng.pick(&[-8, -16, -32, -12]);
        format!("*({store} *)(r10 {slot}) = r9\nr9 = *({load} *)(r10 {slot})\n")
    }

    fn helper_call(&mut self) -> String {
        match self.rng.below(4) {
            0 => "call bpf_get_prandom_u32\nr9 = r0\n".into(),
            1 => "call bpf_ktime_get_ns\nr9 = r0\n".into(),
            2 => "call bpf_get_smp_processor_id\nr9 += r0\n".into(),
            // Reads a clobbered register: the kernel refuses it.
            _ => "call bpf_get_prandom_u32\nr9 = r2\n".into(),
        }
    }

    fn program(&mut self) -> Vec<Block> {
        (0..1 + self.rng.below(5) as usize)
            .map(|k| self.block(k))
            .collect()
    }
}

/// The program text in the probe format.
fn render(blocks: &[Block]) -> String {
    let mut text =
        format!("{MAPS}== p\nr6 = r1\nr7 = *(u32 *)(r6 +0)\nr8 = *(u32 *)(r6 +4)\nr9 = 0\n");
    for b in blocks {
        text.push_str(&b.text);
    }
    text.push_str("r0 = 2\nexit\n");
    if blocks.iter().any(|b| b.calls_sub) {
        text.push_str("sub:\nr0 = r1\nr0 &= 7\nexit\n");
    }
    text
}

/// Both verdicts on a rendered program.
fn judge(text: &str, running: &Kernel) -> (probe::Probe, Judgement, Judgement) {
    let p = probe::parse_file("random", "<generated>", text)
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
        .remove(0);
    let kernel = kernel_side::judge(&p).unwrap_or_else(|e| panic!("{e}"));
    let ours = bpfemu_side::judgement(&bpfemu_side::verify_probe(&p, &Options::default(), running));
    (p, kernel, ours)
}

/// Drops blocks while the two verifiers still disagree in the same way.
fn minimise(
    mut blocks: Vec<Block>,
    kernel: &Judgement,
    ours: &Judgement,
    running: &Kernel,
) -> Vec<Block> {
    let same = |k: &Judgement, o: &Judgement| {
        k.accepted == kernel.accepted
            && o.accepted == ours.accepted
            && k.message == kernel.message
            && o.message == ours.message
    };
    let mut i = 0;
    while i < blocks.len() {
        let mut fewer = blocks.clone();
        fewer.remove(i);
        let (_, k, o) = judge(&render(&fewer), running);
        if same(&k, &o) {
            blocks = fewer;
        } else {
            i += 1;
        }
    }
    blocks
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn random_programs_match_the_kernel() {
    if !bpfemu_conformance::libbpf::kernel_or_skip("random_programs_match_the_kernel") {
        return;
    }
    let count = env_number("BPFEMU_RANDOM_PROGRAMS", 1500);
    let seed = env_number("BPFEMU_RANDOM_SEED", 1);
    let mut generator = Generator {
        rng: Rng::new(seed),
    };
    let mut tally = Tally::default();
    let mut names = Vec::new();
    let mut minimised = BTreeMap::new();
    let mut faults = Vec::new();
    let mut accepted = 0;
    let mut run = 0;
    // One kernel for every program: its BTF (kfunc calls) is read once.
    let running = Kernel::running();
    for index in 0..count {
        let blocks = generator.program();
        let text = render(&blocks);
        let (p, kernel, ours) = judge(&text, &running);
        let name = format!("random/{seed}-{index}");
        if !tally.record(&name, &kernel, &ours) {
            let small = render(&minimise(blocks, &kernel, &ours, &running));
            minimised.insert(name.clone(), small);
        }
        if ours.accepted {
            accepted += 1;
            // Programs calling kfuncs the runtime does not implement (tasks, RCU) are not run.
            match soundness::run_randomly(&p.insns, &p.maps, seed ^ index, 8, &running) {
                Ok(ran) => run += usize::from(ran),
                Err(e) => faults.push(format!("{name}: accepted by bpfemu, faults: {e}\n{text}")),
            }
        }
        names.push(name);
    }
    println!("{}", tally.summary("random programs"));
    println!(
        "kernel accepted {} of {count}; soundness: {run} of the {accepted} accepted by bpfemu ran \
         on 8 random packets each, {} faulted",
        tally.kernel_accepted,
        faults.len()
    );
    for (name, text) in &minimised {
        println!(
            "--- {name}: {}\n{text}",
            tally.differing.get(name).map_or("", String::as_str)
        );
    }
    assert!(faults.is_empty(), "verifier bugs:\n{}", faults.join("\n"));
    if known::update_requested() {
        known::rewrite("random/", &[], &tally.differing, &names);
        return;
    }
    // Only the programs this run generated (another seed or count lists others).
    let mut listed = known::load("random/", &[]);
    listed.retain(|name, _| names.contains(name));
    let complaints = known::check(&listed, &tally.differing, &names);
    assert!(
        complaints.is_empty(),
        "{} problems with {} (the minimised programs are printed above: keep each as a probe):\n{}\n{}",
        complaints.len(),
        known::known_differences_path().display(),
        complaints.join("\n"),
        known::UPDATE_HINT
    );
}

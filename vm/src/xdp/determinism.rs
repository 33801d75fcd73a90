//! Where the kernel reads the machine (clocks, the random pool, the CPU it runs on), bpfemu
//! reads the packet and the configuration, so that the same capture and seed give the same
//! results everywhere:
//!
//! - every clock (`bpf_ktime_get_ns`, `_boot_ns`, `_coarse_ns`, `bpf_jiffies64`) is the
//!   packet's timestamp ([`PacketMeta::ts_ns`](super::PacketMeta)), constant during the run of
//!   one packet (the kernel's clock moves by nanoseconds during a run; no program can rely on
//!   that). The coarse clock and jiffies have the tick resolution of a `CONFIG_HZ=250` kernel.
//! - `bpf_get_prandom_u32` draws from one generator per virtual CPU (the kernel's state is
//!   per-CPU too), seeded from [`XdpConfig::seed`](super::XdpConfig) and the CPU number.
//! - `bpf_get_smp_processor_id` is the packet's virtual CPU; `bpf_get_numa_node_id` is 0.

/// Nanoseconds per jiffy at `CONFIG_HZ=250`.
pub const NSEC_PER_JIFFY: u64 = 4_000_000;

/// The clocks of one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    pub ts_ns: u64,
}

impl Clock {
    /// `bpf_ktime_get_ns` and `bpf_ktime_get_boot_ns`.
    pub fn ns(self) -> u64 {
        self.ts_ns
    }

    /// `bpf_ktime_get_coarse_ns`: the time at the last tick.
    pub fn coarse_ns(self) -> u64 {
        self.ts_ns - self.ts_ns % NSEC_PER_JIFFY
    }

    /// `bpf_jiffies64`.
    pub fn jiffies64(self) -> u64 {
        self.ts_ns / NSEC_PER_JIFFY
    }
}

/// Per-CPU pseudo-random generators (SplitMix64: small, fast, fully determined by the seed).
#[derive(Clone, Debug)]
pub struct Prandom {
    states: Vec<u64>,
}

impl Prandom {
    pub fn new(seed: u64, cpus: u32) -> Prandom {
        let states = (0..cpus.max(1) as u64)
            .map(|cpu| seed ^ cpu.wrapping_mul(0xa076_1d64_78bd_642f))
            .collect();
        Prandom { states }
    }

    /// The next `bpf_get_prandom_u32` on `cpu`.
    pub fn next_u32(&mut self, cpu: u32) -> u32 {
        let state = &mut self.states[cpu as usize];
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 32) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_follow_the_packet() {
        let c = Clock {
            ts_ns: 10_000_000_123,
        };
        assert_eq!(c.ns(), 10_000_000_123);
        assert_eq!(c.coarse_ns(), 10_000_000_000);
        assert_eq!(c.jiffies64(), 2500);
    }

    #[test]
    fn prandom_is_seeded_and_per_cpu() {
        let (mut a, mut b) = (Prandom::new(7, 2), Prandom::new(7, 2));
        let xs: Vec<u32> = (0..4).map(|_| a.next_u32(0)).collect();
        let ys: Vec<u32> = (0..4).map(|_| b.next_u32(0)).collect();
        assert_eq!(xs, ys);
        assert_ne!(a.next_u32(1), a.next_u32(0));
        assert_ne!(
            Prandom::new(8, 1).next_u32(0),
            Prandom::new(7, 1).next_u32(0)
        );
    }
}

//! Neighbours: the IP -> MAC entries with their NUD state, and what the helper writes from
//! them.

use std::net::IpAddr;

use super::*;

/// Neighbour states (`NUD_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NudState {
    Incomplete,
    Reachable,
    Stale,
    Delay,
    Probe,
    Failed,
    Noarp,
    Permanent,
    None,
}

impl NudState {
    pub(super) fn parse(s: &str) -> Option<NudState> {
        Some(match s.to_ascii_lowercase().as_str() {
            "incomplete" => NudState::Incomplete,
            "reachable" => NudState::Reachable,
            "stale" => NudState::Stale,
            "delay" => NudState::Delay,
            "probe" => NudState::Probe,
            "failed" => NudState::Failed,
            "noarp" => NudState::Noarp,
            "permanent" => NudState::Permanent,
            "none" => NudState::None,
            _ => return None,
        })
    }

    /// `NUD_VALID`.
    pub fn is_valid(self) -> bool {
        matches!(
            self,
            NudState::Permanent
                | NudState::Noarp
                | NudState::Reachable
                | NudState::Probe
                | NudState::Stale
                | NudState::Delay
        )
    }
}

/// One neighbour entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neighbour {
    pub ip: IpAddr,
    pub mac: [u8; 6],
    pub dev: u32,
    pub state: NudState,
}

impl Fib {
    /// Writes the next hop's MAC and the egress interface's into `p`; false when the next
    /// hop has no valid neighbour entry.
    pub(super) fn fill_macs(&self, p: &mut [u8; 64], nh_dev: &Interface, next_hop: IpAddr) -> bool {
        match self.neighbour(nh_dev.ifindex, next_hop) {
            Some(n) if n.state.is_valid() => {
                p[offsets::DMAC..offsets::DMAC + 6].copy_from_slice(&n.mac);
                p[offsets::SMAC..offsets::SMAC + 6].copy_from_slice(&nh_dev.mac);
                true
            }
            _ => false,
        }
    }

    pub(super) fn neighbour(&self, dev: u32, ip: IpAddr) -> Option<&Neighbour> {
        self.neighbours.iter().find(|n| n.dev == dev && n.ip == ip)
    }
}

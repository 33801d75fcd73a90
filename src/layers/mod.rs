//! Packets by layer: a frame read into named layers and fields ([`dissect`]), a frame built
//! from them with lengths and checksums filled in ([`build`]), and the one line `tcpdump -n -e`
//! prints for it ([`tcpdump`]). `bpfemu run` and `bpfemu test` share them, so a test file
//! names fields (`ipv4.ttl`) the way a failure reports them.

pub mod build;
pub mod dissect;
pub mod proto;
pub mod tcpdump;

use std::fmt;

/// One field's value, as compared and shown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Field {
    /// A number shown in decimal.
    Num(u64),
    /// A number shown in hex with this many digits (checksums, ethertypes).
    Hex(u64, usize),
    /// Addresses and byte strings, in their usual text (`02:00:00:00:00:0a`, `192.0.2.1`,
    /// hex for bytes).
    Text(String),
}

impl Field {
    /// The number, when it is one.
    pub fn number(&self) -> Option<u64> {
        match self {
            Field::Num(n) | Field::Hex(n, _) => Some(*n),
            Field::Text(_) => None,
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Field::Num(n) => write!(f, "{n}"),
            Field::Hex(n, digits) => write!(f, "0x{n:0digits$x}"),
            Field::Text(s) => f.write_str(s),
        }
    }
}

/// One layer of a frame: its name (`eth`, `vlan`, `ipv4`, `tcp`, ...) and its fields in
/// header order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    pub name: String,
    pub fields: Vec<(&'static str, Field)>,
}

impl Layer {
    pub fn get(&self, field: &str) -> Option<&Field> {
        self.fields
            .iter()
            .find(|(n, _)| *n == field)
            .map(|(_, v)| v)
    }
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn mac_text(mac: &[u8]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The names a layer may have, in the order they may appear, for messages.
pub const LAYER_NAMES: &[&str] = &[
    "eth", "vlan", "vlan2", "arp", "ipv4", "ipv6", "hop", "routing", "fragment", "dstopts", "tcp",
    "udp", "icmp", "icmpv6", "payload",
];

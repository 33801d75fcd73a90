//! The protocol numbers packets are read and built by (`linux/if_ether.h`, `linux/in.h`,
//! `linux/ipv6.h`): one place for the layers, the generated traffic and the fuzzer's mutator.

pub const ETH_P_IP: u16 = 0x0800;
pub const ETH_P_IPV6: u16 = 0x86dd;
pub const ETH_P_ARP: u16 = 0x0806;
pub const ETH_P_8021Q: u16 = 0x8100;
pub const ETH_P_8021AD: u16 = 0x88a8;

pub const IPPROTO_HOPOPTS: u8 = 0;
pub const IPPROTO_ICMP: u8 = 1;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;
pub const IPPROTO_ROUTING: u8 = 43;
pub const IPPROTO_FRAGMENT: u8 = 44;
pub const IPPROTO_GRE: u8 = 47;
pub const IPPROTO_ICMPV6: u8 = 58;
pub const IPPROTO_NONE: u8 = 59;
pub const IPPROTO_DSTOPTS: u8 = 60;

/// IPv6's names for its extension headers' next-header values (`NEXTHDR_*`).
pub const NEXTHDR_HOP: u8 = IPPROTO_HOPOPTS;
pub const NEXTHDR_ROUTING: u8 = IPPROTO_ROUTING;
pub const NEXTHDR_FRAGMENT: u8 = IPPROTO_FRAGMENT;
pub const NEXTHDR_DEST: u8 = IPPROTO_DSTOPTS;

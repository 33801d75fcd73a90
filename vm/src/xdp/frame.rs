//! [`XdpFrame`]: the `xdp_buff` as `BPF_PROG_TEST_RUN` builds it (net/bpf/test_run.c,
//! `bpf_prog_test_run_xdp`), and the frame arithmetic of the helpers that move its bounds
//! (net/core/filter.c: `bpf_xdp_adjust_head/meta/tail`).
//!
//! test_run allocates one page-sized frame: [`XDP_PACKET_HEADROOM`] bytes of headroom, the
//! packet, and room up to the frame's end, of which the last [`SKB_SHARED_INFO_SIZE`] bytes
//! are reserved for `struct skb_shared_info`. `data_meta` starts equal to `data` (metadata is
//! supported), and the first [`XDP_FRAME_STRUCT_SIZE`] bytes of the headroom can never become
//! packet or metadata (they are kept for the `struct xdp_frame` a redirect writes there).
//!
//! The frame is one windowed region of [`Memory`]: the program may touch
//! `[data_meta, data_end)` only, and every helper that moves a bound moves the window and the
//! converted ctx fields with it ([`XdpFrame::sync`]).

use super::ctx::{self, CtxField};
use super::errno::EACCES;
use crate::maps::Errno;
use crate::memory::{CtxFields, Memory, RegionId, RegionKind};

/// `XDP_PACKET_HEADROOM`.
pub const XDP_PACKET_HEADROOM: usize = 256;
/// `SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` on x86-64.
pub const SKB_SHARED_INFO_SIZE: usize = 320;
/// test_run's frame size (`frag_size`): `PAGE_SIZE`.
pub const FRAME_SIZE: usize = 4096;
/// The largest packet test_run holds in the linear part: the page less headroom and tailroom.
pub const MAX_LINEAR_SIZE: usize = FRAME_SIZE - XDP_PACKET_HEADROOM - SKB_SHARED_INFO_SIZE;
/// `ETH_HLEN`: the smallest packet, and the least `adjust_head/tail` leave.
pub const ETH_HLEN: usize = 14;
/// `sizeof(struct xdp_frame)` on x86-64: headroom no adjustment may reach.
pub const XDP_FRAME_STRUCT_SIZE: usize = 40;
/// The largest metadata length: `skb_shared_info::meta_len` is a u8, and the length must be a
/// multiple of 4 (`xdp_metalen_invalid`).
pub const XDP_META_MAX: usize = 255;

/// The frame of one run: bounds as offsets from `data_hard_start`, the receive queue.
#[derive(Debug)]
pub struct XdpFrame {
    region: RegionId,
    ctx: RegionId,
    meta: usize,
    data: usize,
    end: usize,
    ingress_ifindex: u32,
    rx_queue_index: u32,
}

/// Why test_run refuses a packet: its errno and the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub errno: Errno,
    pub reason: String,
}

impl XdpFrame {
    /// Builds the frame for `packet` as test_run does, with its converted ctx, in `mem`.
    pub fn new(
        mem: &mut Memory,
        packet: &[u8],
        ingress_ifindex: u32,
        rx_queue_index: u32,
    ) -> Result<XdpFrame, Refusal> {
        check_size(packet.len())?;
        let (data, end) = (XDP_PACKET_HEADROOM, XDP_PACKET_HEADROOM + packet.len());
        let region = mem.add_windowed(RegionKind::Packet, FRAME_SIZE, (data, packet.len()), true);
        mem.region_mut(region)
            .expect("just added")
            .extent_bytes_mut()[data..end]
            .copy_from_slice(packet);
        let ctx = mem.add_converted_ctx(CtxFields {
            values: vec![0; ctx::FIELDS],
        });
        let frame = XdpFrame {
            region,
            ctx,
            meta: data,
            data,
            end,
            ingress_ifindex,
            rx_queue_index,
        };
        frame.sync(mem);
        Ok(frame)
    }

    /// Removes the frame's regions from `mem`.
    pub fn release(self, mem: &mut Memory) {
        mem.remove(self.region);
        mem.remove(self.ctx);
    }

    /// The ctx address the program gets in r1.
    pub fn ctx_addr(&self, mem: &Memory) -> u64 {
        mem.region(self.ctx).expect("live ctx").base()
    }

    pub fn ingress_ifindex(&self) -> u32 {
        self.ingress_ifindex
    }

    /// `data_end - data`: the linear packet length (`xdp_get_buff_len` without frags).
    pub fn len(&self) -> usize {
        self.end - self.data
    }

    pub fn is_empty(&self) -> bool {
        self.end == self.data
    }

    pub fn meta_len(&self) -> usize {
        self.data - self.meta
    }

    /// What test_run copies out: from `data_meta` to `data_end`.
    pub fn data_out(&self, mem: &Memory) -> Vec<u8> {
        self.extent(mem)[self.meta..self.end].to_vec()
    }

    /// The packet bytes `[data, data_end)`.
    pub fn packet<'m>(&self, mem: &'m Memory) -> &'m [u8] {
        &self.extent(mem)[self.data..self.end]
    }

    /// The packet bytes `[data, data_end)`, for helpers to write.
    pub fn packet_mut<'m>(&self, mem: &'m mut Memory) -> &'m mut [u8] {
        let (data, end) = (self.data, self.end);
        &mut self.extent_mut(mem)[data..end]
    }

    fn extent<'m>(&self, mem: &'m Memory) -> &'m [u8] {
        mem.region(self.region).expect("live frame").extent_bytes()
    }

    fn extent_mut<'m>(&self, mem: &'m mut Memory) -> &'m mut [u8] {
        mem.region_mut(self.region)
            .expect("live frame")
            .extent_bytes_mut()
    }

    /// Publishes the bounds: the live window and the ctx fields the program loads.
    pub fn sync(&self, mem: &mut Memory) {
        mem.set_window(self.region, self.meta, self.end - self.meta);
        let base = mem.region(self.region).expect("live frame").extent_base();
        let fields = [
            (CtxField::Data, base + self.data as u64),
            (CtxField::DataEnd, base + self.end as u64),
            (CtxField::DataMeta, base + self.meta as u64),
            (CtxField::IngressIfindex, self.ingress_ifindex as u64),
            (CtxField::RxQueueIndex, self.rx_queue_index as u64),
            (CtxField::EgressIfindex, 0),
        ];
        for (field, value) in fields {
            mem.set_ctx_field(self.ctx, field as usize, value);
        }
    }

    /// `bpf_xdp_adjust_head`: moves `data` (and the metadata with it) by `delta`; the packet
    /// keeps at least an Ethernet header, the metadata stays clear of the `xdp_frame` area.
    pub fn adjust_head(&mut self, mem: &mut Memory, delta: i32) -> Result<(), Errno> {
        let metalen = self.meta_len();
        let data = offset_by(self.data, delta).ok_or(Errno::EINVAL)?;
        if data < XDP_FRAME_STRUCT_SIZE + metalen || data + ETH_HLEN > self.end {
            return Err(Errno::EINVAL);
        }
        let meta = data - metalen;
        if metalen > 0 {
            let from = self.meta;
            self.extent_mut(mem).copy_within(from..from + metalen, meta);
        }
        (self.meta, self.data) = (meta, data);
        self.sync(mem);
        Ok(())
    }

    /// `bpf_xdp_adjust_meta`: moves `data_meta` by `delta`, between the end of the
    /// `xdp_frame` area and `data`, to a length that is a multiple of 4 and fits a u8.
    pub fn adjust_meta(&mut self, mem: &mut Memory, delta: i32) -> Result<(), Errno> {
        let meta = offset_by(self.meta, delta).ok_or(Errno::EINVAL)?;
        if meta < XDP_FRAME_STRUCT_SIZE || meta > self.data {
            return Err(Errno::EINVAL);
        }
        let metalen = self.data - meta;
        if !metalen.is_multiple_of(4) || metalen > XDP_META_MAX {
            return Err(EACCES);
        }
        self.meta = meta;
        self.sync(mem);
        Ok(())
    }

    /// `bpf_xdp_adjust_tail`: moves `data_end` by `delta`, up to the shared-info reserve at
    /// the frame's end and down to an Ethernet header; grown bytes are zeroed.
    pub fn adjust_tail(&mut self, mem: &mut Memory, delta: i32) -> Result<(), Errno> {
        let end = offset_by(self.end, delta).ok_or(Errno::EINVAL)?;
        if end > FRAME_SIZE - SKB_SHARED_INFO_SIZE || end < self.data + ETH_HLEN {
            return Err(Errno::EINVAL);
        }
        if end > self.end {
            let from = self.end;
            self.extent_mut(mem)[from..end].fill(0);
        }
        self.end = end;
        self.sync(mem);
        Ok(())
    }

    /// The bounds check of `bpf_xdp_load_bytes/store_bytes` (`bpf_xdp_pointer` on a linear
    /// buffer): offset and length at most 0xffff (EFAULT), inside the packet (EINVAL).
    pub fn byte_range(&self, offset: u32, len: u32) -> Result<std::ops::Range<usize>, Errno> {
        if offset > 0xffff || len > 0xffff {
            return Err(Errno::EFAULT);
        }
        let (start, end) = (offset as usize, offset as usize + len as usize);
        if end > self.len() {
            return Err(Errno::EINVAL);
        }
        Ok(start..end)
    }
}

/// test_run's size checks: at least an Ethernet header (EINVAL, as the kernel). Past the
/// linear part of the frame the kernel puts the rest in fragments and runs the program
/// anyway; bpfemu does not model fragments yet and refuses such packets (EINVAL too).
fn check_size(len: usize) -> Result<(), Refusal> {
    let reason = if len < ETH_HLEN {
        format!("packet of {len} bytes is shorter than an Ethernet header ({ETH_HLEN})")
    } else if len > MAX_LINEAR_SIZE {
        format!(
            "packet of {len} bytes is longer than the {MAX_LINEAR_SIZE} bytes of an XDP frame's \
             linear part; the kernel would carry the rest in fragments, which bpfemu does not \
             model yet"
        )
    } else {
        return Ok(());
    };
    Err(Refusal {
        errno: Errno::EINVAL,
        reason,
    })
}

fn offset_by(at: usize, delta: i32) -> Option<usize> {
    at.checked_add_signed(delta as isize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(len: usize) -> (Memory, XdpFrame) {
        let mut mem = Memory::new();
        let packet: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let f = XdpFrame::new(&mut mem, &packet, 1, 0).unwrap();
        (mem, f)
    }

    #[test]
    fn sizes_test_run_refuses() {
        let mut mem = Memory::new();
        for len in [0, 13, MAX_LINEAR_SIZE + 1] {
            let err = XdpFrame::new(&mut mem, &vec![0; len], 1, 0).unwrap_err();
            assert_eq!(err.errno, Errno::EINVAL);
        }
        assert!(XdpFrame::new(&mut mem, &[0; 14], 1, 0).is_ok());
        assert!(XdpFrame::new(&mut mem, &vec![0; MAX_LINEAR_SIZE], 1, 0).is_ok());
    }

    #[test]
    fn adjust_head_bounds() {
        let (mut mem, mut f) = frame(64);
        assert_eq!(f.adjust_head(&mut mem, 51), Err(Errno::EINVAL));
        assert_eq!(f.adjust_head(&mut mem, 50), Ok(()));
        assert_eq!(f.len(), 14);
        assert_eq!(f.adjust_head(&mut mem, -50), Ok(()));
        let room = -((XDP_PACKET_HEADROOM - XDP_FRAME_STRUCT_SIZE) as i32);
        assert_eq!(f.adjust_head(&mut mem, room - 1), Err(Errno::EINVAL));
        assert_eq!(f.adjust_head(&mut mem, room), Ok(()));
        assert_eq!(f.len(), 64 + 216);
        assert_eq!(f.data_out(&mem)[..216], [0; 216]);
    }

    #[test]
    fn adjust_head_carries_metadata() {
        let (mut mem, mut f) = frame(64);
        f.adjust_meta(&mut mem, -8).unwrap();
        let meta_at = mem.region(f.region).unwrap().base();
        mem.write(meta_at, 8, 0x0102_0304_0506_0708).unwrap();
        f.adjust_head(&mut mem, -16).unwrap();
        assert_eq!(f.meta_len(), 8);
        assert_eq!(
            f.data_out(&mem)[..8],
            0x0102_0304_0506_0708u64.to_le_bytes()
        );
        // Metadata limits how far the head may grow.
        let room = -((XDP_PACKET_HEADROOM - 16 - 8 - XDP_FRAME_STRUCT_SIZE) as i32);
        assert_eq!(f.adjust_head(&mut mem, room - 1), Err(Errno::EINVAL));
        assert_eq!(f.adjust_head(&mut mem, room), Ok(()));
    }

    #[test]
    fn adjust_meta_bounds_and_errnos() {
        let (mut mem, mut f) = frame(64);
        assert_eq!(f.adjust_meta(&mut mem, 4), Err(Errno::EINVAL));
        assert_eq!(f.adjust_meta(&mut mem, -3), Err(EACCES));
        assert_eq!(f.adjust_meta(&mut mem, -217), Err(Errno::EINVAL));
        assert_eq!(f.adjust_meta(&mut mem, -216), Ok(()));
        assert_eq!(f.adjust_meta(&mut mem, 216), Ok(()));
        // After the head moves forward, the u8 length limit is what stops a longer meta.
        f.adjust_head(&mut mem, 48).unwrap();
        assert_eq!(f.adjust_meta(&mut mem, -256), Err(EACCES));
        assert_eq!(f.adjust_meta(&mut mem, -252), Ok(()));
        let (mut mem, mut f) = frame(64);
        f.adjust_head(&mut mem, -200).unwrap();
        // Only 16 bytes are left above the xdp_frame area.
        assert_eq!(f.adjust_meta(&mut mem, -20), Err(Errno::EINVAL));
        assert_eq!(f.adjust_meta(&mut mem, -16), Ok(()));
    }

    #[test]
    fn adjust_tail_bounds_and_zeroing() {
        let (mut mem, mut f) = frame(64);
        assert_eq!(f.adjust_tail(&mut mem, -51), Err(Errno::EINVAL));
        assert_eq!(f.adjust_tail(&mut mem, -50), Ok(()));
        assert_eq!(f.adjust_tail(&mut mem, 50), Ok(()));
        assert_eq!(f.packet(&mem)[14..], [0; 50]);
        let max = (MAX_LINEAR_SIZE - 64) as i32;
        assert_eq!(f.adjust_tail(&mut mem, max + 1), Err(Errno::EINVAL));
        assert_eq!(f.adjust_tail(&mut mem, max), Ok(()));
        assert_eq!(f.len(), MAX_LINEAR_SIZE);
    }

    #[test]
    fn window_follows_the_bounds() {
        let (mut mem, mut f) = frame(20);
        let data = mem.read(f.ctx_addr(&mem), 4).unwrap();
        let end = mem.read(f.ctx_addr(&mem) + 4, 4).unwrap();
        assert_eq!(end - data, 20);
        assert!(mem.read(end, 1).is_err());
        assert!(mem.read(data - 1, 1).is_err());
        f.adjust_tail(&mut mem, 4).unwrap();
        assert_eq!(mem.read(end, 4).unwrap(), 0);
        f.adjust_meta(&mut mem, -4).unwrap();
        assert_eq!(mem.read(f.ctx_addr(&mem) + 8, 4).unwrap(), data - 4);
        assert_eq!(mem.read(data - 4, 4).unwrap(), 0);
    }

    #[test]
    fn byte_range_errnos() {
        let (_mem, f) = frame(64);
        assert_eq!(f.byte_range(0x1_0000, 1), Err(Errno::EFAULT));
        assert_eq!(f.byte_range(0, 0x1_0000), Err(Errno::EFAULT));
        assert_eq!(f.byte_range(60, 5), Err(Errno::EINVAL));
        assert_eq!(f.byte_range(60, 4), Ok(60..64));
    }
}

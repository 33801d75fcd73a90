//! [`XdpFrame`]: the `xdp_buff` as `BPF_PROG_TEST_RUN` builds it (net/bpf/test_run.c,
//! `bpf_prog_test_run_xdp`), and the frame arithmetic of the helpers that move its bounds
//! (net/core/filter.c: `bpf_xdp_adjust_head/meta/tail`) or read and write its bytes
//! (`bpf_xdp_load_bytes/store_bytes`).
//!
//! test_run allocates one page-sized frame: [`XDP_PACKET_HEADROOM`] bytes of headroom, the
//! packet, and room up to the frame's end, of which the last [`SKB_SHARED_INFO_SIZE`] bytes
//! are reserved for `struct skb_shared_info`. `data_meta` starts equal to `data` (metadata is
//! supported), and the first [`XDP_FRAME_STRUCT_SIZE`] bytes of the headroom can never become
//! packet or metadata (they are kept for the `struct xdp_frame` a redirect writes there).
//!
//! **Multi-buffer frames.** A packet longer than the linear part ([`MAX_LINEAR_SIZE`]) is not
//! refused: the first [`MAX_LINEAR_SIZE`] bytes fill the linear part and the rest goes, in
//! order, into fragments of up to [`FRAME_SIZE`] bytes each (the `skb_shared_info` frags, one
//! page each), at most [`MAX_FRAGS`] of them; a packet that needs more is refused with
//! `ENOMEM`. The kernel does this for every XDP program, with or without
//! `BPF_F_XDP_HAS_FRAGS`. `data_end` stays the end of the linear part: a program reaches
//! fragment bytes only through helpers (`bpf_xdp_load_bytes/store_bytes`,
//! `bpf_xdp_get_buff_len`, `bpf_xdp_adjust_tail`, the ctx bytes of `bpf_perf_event_output`),
//! so the fragments are buffers of the frame, not regions of [`Memory`]. test_run's
//! `data_out` is the linear part from `data_meta` followed by every fragment.
//!
//! The linear part is one windowed region of [`Memory`]: the program may touch
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
/// `MAX_SKB_FRAGS` (`CONFIG_MAX_SKB_FRAGS`, 17 by default): the most fragments a frame has.
pub const MAX_FRAGS: usize = 17;
/// A fragment's room (`rxq->frag_size`, which test_run sets to the page size): what one
/// holds when test_run fills it, and what `bpf_xdp_adjust_tail` may grow the last one to.
pub const FRAG_SIZE: usize = FRAME_SIZE;
/// The longest packet test_run accepts: the linear part and [`MAX_FRAGS`] full fragments.
pub const MAX_PACKET_SIZE: usize = MAX_LINEAR_SIZE + MAX_FRAGS * FRAG_SIZE;
/// The largest offset and length `bpf_xdp_load_bytes/store_bytes` take (`bpf_xdp_pointer`).
pub const XDP_BYTES_MAX: u32 = 0xffff;
/// The largest metadata length: `skb_shared_info::meta_len` is a u8, and the length must be a
/// multiple of 4 (`xdp_metalen_invalid`).
pub const XDP_META_MAX: usize = 255;

/// The most metadata test_run takes from a ctx (`xdp_md.data`): what the headroom holds in
/// front of the packet clear of the `struct xdp_frame` area (Linux 6.18 refuses more with
/// EINVAL, checked against the kernel by `tests/ctx_vs_kernel.rs`).
pub const XDP_CTX_META_MAX: usize = XDP_PACKET_HEADROOM - XDP_FRAME_STRUCT_SIZE;

/// The frame of one run: bounds of the linear part as offsets from `data_hard_start`, the
/// fragments, the receive queue.
///
/// A frame is built once and reloaded for every packet ([`XdpFrame::load`]): no allocation,
/// and only the headroom bytes the last packet could have changed are cleaned, so that each
/// packet finds what test_run's freshly zeroed page holds wherever a program can look: the
/// headroom (which `bpf_xdp_adjust_head/meta` expose as they are) is zero. The bytes past the
/// packet are left as the last packet left them: nothing reaches them but
/// `bpf_xdp_adjust_tail`, which zeroes what it grows, as the kernel's does (`memset(data_end,
/// 0, offset)`), and test_run copies out only `[data_meta, data_end)`.
#[derive(Debug)]
pub struct XdpFrame {
    region: RegionId,
    /// The host address of the frame's first byte (`data_hard_start`); the allocation never
    /// moves.
    base: u64,
    ctx: RegionId,
    /// The ctx region's address, which never moves either (the program's r1).
    ctx_base: u64,
    meta: usize,
    data: usize,
    end: usize,
    /// The fragments' bytes, in packet order; none empty, none over [`FRAG_SIZE`]. The frame
    /// has frags (`xdp_buff_has_frags`) exactly when this is not empty.
    frags: Vec<Vec<u8>>,
    /// Buffers of released fragments, kept for the next packets' fragments.
    spare_frags: Vec<Vec<u8>>,
    /// The lowest `data_meta` since the last load: below it, the headroom is all zero
    /// (nothing else can be written there).
    headroom_lo: usize,
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
        XdpFrame::with_meta(mem, packet, 0, ingress_ifindex, rx_queue_index)
    }

    /// Builds the frame test_run builds from a ctx whose `data` is `meta_len` (see
    /// [`XdpFrame::load`]).
    pub fn with_meta(
        mem: &mut Memory,
        input: &[u8],
        meta_len: usize,
        ingress_ifindex: u32,
        rx_queue_index: u32,
    ) -> Result<XdpFrame, Refusal> {
        check_size(input.len(), meta_len)?;
        let mut frame = XdpFrame::empty(mem);
        frame.load(mem, input, meta_len, ingress_ifindex, rx_queue_index)?;
        Ok(frame)
    }

    /// A zeroed frame holding no packet yet, with its regions in `mem`: load packets into it
    /// with [`XdpFrame::load`].
    pub fn empty(mem: &mut Memory) -> XdpFrame {
        let region = mem.add_windowed(
            RegionKind::Packet,
            FRAME_SIZE,
            (XDP_PACKET_HEADROOM, 0),
            true,
        );
        let base = mem.region(region).expect("just added").extent_base();
        let ctx = mem.add_converted_ctx(CtxFields {
            values: vec![0; ctx::FIELDS],
        });
        let ctx_base = mem.region(ctx).expect("just added").base();
        XdpFrame {
            region,
            base,
            ctx,
            ctx_base,
            meta: XDP_PACKET_HEADROOM,
            data: XDP_PACKET_HEADROOM,
            end: XDP_PACKET_HEADROOM,
            frags: Vec::new(),
            spare_frags: Vec::new(),
            headroom_lo: XDP_PACKET_HEADROOM,
            ingress_ifindex: 0,
            rx_queue_index: 0,
        }
    }

    /// Loads the frame test_run builds from `input` and a ctx whose `data` is `meta_len`: the
    /// first `meta_len` bytes of `input` are metadata, taken out of the headroom in front of
    /// the packet (`data_meta = data - meta_len`, `data` stays [`XDP_PACKET_HEADROOM`] into
    /// the frame); the linear part holds the metadata and up to [`MAX_LINEAR_SIZE`] packet
    /// bytes, the rest goes into fragments. Every other byte of the frame is zero, as in
    /// test_run's zeroed page. `meta_len` must already be valid (at most `input.len()`, a
    /// multiple of 4, at most [`XDP_CTX_META_MAX`]): test_run checks the ctx first.
    pub fn load(
        &mut self,
        mem: &mut Memory,
        input: &[u8],
        meta_len: usize,
        ingress_ifindex: u32,
        rx_queue_index: u32,
    ) -> Result<(), Refusal> {
        assert!(
            meta_len <= input.len() && meta_len <= XDP_CTX_META_MAX,
            "metadata length checked by the caller"
        );
        check_size(input.len(), meta_len)?;
        let (linear, rest) = input.split_at(input.len().min(MAX_LINEAR_SIZE + meta_len));
        let meta = XDP_PACKET_HEADROOM - meta_len;
        let end = meta + linear.len();
        // What the last packet may have left in the headroom goes back to zero (past the
        // packet, nothing is visible until adjust_tail zeroes it).
        let zero_from = self.headroom_lo;
        if !self.frags.is_empty() {
            self.spare_frags.append(&mut self.frags);
        }
        if !rest.is_empty() {
            self.load_frags(rest);
        }
        (self.meta, self.data, self.end) = (meta, XDP_PACKET_HEADROOM, end);
        self.headroom_lo = meta;
        (self.ingress_ifindex, self.rx_queue_index) = (ingress_ifindex, rx_queue_index);
        // The bytes, the window and the ctx fields in one memory operation (each region
        // looked up once); the bounds from here, not read back from `self` just after the
        // stores above: a wide load of two of them would wait for those stores (a
        // store-forwarding stall that cost more than the rest of the load).
        let fields = self.fields(
            [meta, XDP_PACKET_HEADROOM, end],
            ingress_ifindex,
            rx_queue_index,
        );
        mem.load_window_and_ctx(self.region, zero_from, meta, linear, self.ctx, &fields);
        Ok(())
    }

    /// The bytes past the linear part, into fragments (buffers of released ones reused).
    #[cold]
    fn load_frags(&mut self, rest: &[u8]) {
        for chunk in rest.chunks(FRAG_SIZE) {
            let mut frag = self.spare_frags.pop().unwrap_or_default();
            frag.clear();
            frag.extend_from_slice(chunk);
            self.frags.push(frag);
        }
    }

    /// Removes the frame's regions from `mem`.
    pub fn release(self, mem: &mut Memory) {
        mem.remove(self.region);
        mem.remove(self.ctx);
    }

    /// The ctx address the program gets in r1.
    pub fn ctx_addr(&self) -> u64 {
        self.ctx_base
    }

    pub fn ingress_ifindex(&self) -> u32 {
        self.ingress_ifindex
    }

    /// `data_end - data`: the length of the linear part, all a program sees directly.
    pub fn len(&self) -> usize {
        self.end - self.data
    }

    /// Whether the frame has fragments (`xdp_buff_has_frags`).
    pub fn has_frags(&self) -> bool {
        !self.frags.is_empty()
    }

    /// The fragments' bytes, in packet order.
    pub fn frags(&self) -> &[Vec<u8>] {
        &self.frags
    }

    /// `sinfo->xdp_frags_size`: the bytes the fragments hold.
    pub fn frags_len(&self) -> usize {
        self.frags.iter().map(Vec::len).sum()
    }

    /// `xdp_get_buff_len`: the linear part and the fragments.
    pub fn buff_len(&self) -> usize {
        self.len() + self.frags_len()
    }

    pub fn is_empty(&self) -> bool {
        self.end == self.data
    }

    pub fn meta_len(&self) -> usize {
        self.data - self.meta
    }

    /// What test_run copies out (`bpf_test_finish`): the linear part from `data_meta` to
    /// `data_end`, then every fragment.
    pub fn data_out(&self, mem: &Memory) -> Vec<u8> {
        let mut out = self.extent(mem)[self.meta..self.end].to_vec();
        for frag in &self.frags {
            out.extend_from_slice(frag);
        }
        out
    }

    /// The address of `data_out`'s first byte (`data_meta`): its linear part lies at
    /// `[data_meta, data_end)`, the fragments follow.
    pub fn data_out_addr(&self, mem: &Memory) -> (u64, usize) {
        let base = mem.region(self.region).expect("live frame").extent_base();
        (base + self.meta as u64, self.end - self.meta)
    }

    /// The linear packet bytes `[data, data_end)`.
    pub fn packet<'m>(&self, mem: &'m Memory) -> &'m [u8] {
        &self.extent(mem)[self.data..self.end]
    }

    /// The linear packet bytes `[data, data_end)`, for helpers to write.
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
    pub fn sync(&mut self, mem: &mut Memory) {
        self.publish(
            mem,
            [self.meta, self.data, self.end],
            self.ingress_ifindex,
            self.rx_queue_index,
        );
    }

    /// [`XdpFrame::sync`] with the frame's bounds `[data_meta, data, data_end]` and receive
    /// queue given. Inlined, so that the bounds stay in registers: passed as one value in
    /// memory, they were read back with a wide load over the caller's narrow stores.
    #[inline(always)]
    fn publish(
        &mut self,
        mem: &mut Memory,
        [meta, data, end]: [usize; 3],
        ingress_ifindex: u32,
        rx_queue_index: u32,
    ) {
        self.headroom_lo = self.headroom_lo.min(meta);
        let fields = self.fields([meta, data, end], ingress_ifindex, rx_queue_index);
        mem.set_window(self.region, meta, end - meta);
        mem.set_ctx_fields(self.ctx, &fields);
    }

    /// The ctx fields the program loads, for the bounds `[data_meta, data, data_end]` and
    /// receive queue given.
    #[inline(always)]
    fn fields(
        &self,
        [meta, data, end]: [usize; 3],
        ingress_ifindex: u32,
        rx_queue_index: u32,
    ) -> [u64; ctx::FIELDS] {
        let base = self.base;
        let mut fields = [0u64; ctx::FIELDS];
        fields[CtxField::Data as usize] = base + data as u64;
        fields[CtxField::DataEnd as usize] = base + end as u64;
        fields[CtxField::DataMeta as usize] = base + meta as u64;
        fields[CtxField::IngressIfindex as usize] = ingress_ifindex as u64;
        fields[CtxField::RxQueueIndex as usize] = rx_queue_index as u64;
        fields[CtxField::EgressIfindex as usize] = 0;
        fields
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
    /// the frame's end and down to an Ethernet header; grown bytes are zeroed. A frame with
    /// fragments grows or shrinks at the end of its last fragment instead
    /// (`frags_grow_tail`, `frags_shrink_tail`).
    pub fn adjust_tail(&mut self, mem: &mut Memory, delta: i32) -> Result<(), Errno> {
        if self.has_frags() {
            return if delta < 0 {
                // The kernel negates the int as it is (wrapping): i32::MIN stays negative.
                self.frags_shrink_tail(mem, delta.wrapping_neg())
            } else {
                self.frags_grow_tail(delta as usize)
            };
        }
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

    /// `bpf_xdp_frags_increase_tail`: the last fragment grows by `grow` zeroed bytes, up to
    /// its room ([`FRAG_SIZE`]); never into a new fragment (EINVAL).
    fn frags_grow_tail(&mut self, grow: usize) -> Result<(), Errno> {
        let last = self.frags.last_mut().expect("a frame with frags");
        if grow > FRAG_SIZE - last.len() {
            return Err(Errno::EINVAL);
        }
        last.resize(last.len() + grow, 0);
        Ok(())
    }

    /// `bpf_xdp_frags_shrink_tail`: `shrink` bytes come off the end of the packet, fragment
    /// by fragment from the last; emptied fragments are released, and once none is left the
    /// rest comes off the linear part. At least an Ethernet header must remain (EINVAL).
    /// `shrink` is the kernel's int: a negative one (from `i32::MIN`) passes the check and
    /// changes nothing.
    fn frags_shrink_tail(&mut self, mem: &mut Memory, shrink: i32) -> Result<(), Errno> {
        if i64::from(shrink) > self.buff_len() as i64 - ETH_HLEN as i64 {
            return Err(Errno::EINVAL);
        }
        let mut left = shrink.max(0) as usize;
        while left > 0 {
            let Some(last) = self.frags.last_mut() else {
                break;
            };
            if last.len() <= left {
                left -= last.len();
                self.frags.pop();
            } else {
                last.truncate(last.len() - left);
                left = 0;
            }
        }
        if self.frags.is_empty() && left > 0 {
            self.end -= left;
            self.sync(mem);
        }
        Ok(())
    }

    /// The checks of `bpf_xdp_load_bytes/store_bytes` (`bpf_xdp_pointer`): offset and length
    /// at most [`XDP_BYTES_MAX`] (EFAULT), the range inside the packet, fragments included
    /// (EINVAL).
    pub fn check_bytes(&self, offset: u32, len: u32) -> Result<(), Errno> {
        if offset > XDP_BYTES_MAX || len > XDP_BYTES_MAX {
            return Err(Errno::EFAULT);
        }
        if offset as usize + len as usize > self.buff_len() {
            return Err(Errno::EINVAL);
        }
        Ok(())
    }

    /// `bpf_xdp_load_bytes`' read: `len` packet bytes at `offset`, across the linear part and
    /// the fragments as `bpf_xdp_copy_buf` walks them, after [`Self::check_bytes`].
    pub fn read_bytes(&self, mem: &Memory, offset: u32, len: u32) -> Result<Vec<u8>, Errno> {
        self.check_bytes(offset, len)?;
        Ok(self.copy_out(mem, offset as usize, len as usize))
    }

    /// `bpf_xdp_store_bytes`' write: `bytes` into the packet at `offset`, across the linear
    /// part and the fragments, after [`Self::check_bytes`].
    pub fn write_bytes(
        &mut self,
        mem: &mut Memory,
        offset: u32,
        bytes: &[u8],
    ) -> Result<(), Errno> {
        self.check_bytes(offset, u32::try_from(bytes.len()).unwrap_or(u32::MAX))?;
        let (mut done, mut at) = (0, offset as usize);
        let linear = self.packet_mut(mem);
        for piece in std::iter::once(linear).chain(self.frags.iter_mut().map(Vec::as_mut_slice)) {
            if at < piece.len() {
                let n = (bytes.len() - done).min(piece.len() - at);
                piece[at..at + n].copy_from_slice(&bytes[done..done + n]);
                done += n;
                at = 0;
            } else {
                at -= piece.len();
            }
            if done == bytes.len() {
                break;
            }
        }
        Ok(())
    }

    /// The first `len` packet bytes, fragments included (`bpf_xdp_copy`, what
    /// `bpf_perf_event_output` appends); `None` past `bpf_xdp_get_buff_len`.
    pub fn head_bytes(&self, mem: &Memory, len: usize) -> Option<Vec<u8>> {
        (len <= self.buff_len()).then(|| self.copy_out(mem, 0, len))
    }

    /// `len` bytes at `offset` of a range already checked to be inside the packet.
    fn copy_out(&self, mem: &Memory, offset: usize, len: usize) -> Vec<u8> {
        let mut out = vec![0; len];
        self.copy_out_into(mem, offset, &mut out);
        out
    }

    /// The packet bytes from `offset` that fill `out`, fragments included, of a range already
    /// checked ([`Self::check_bytes`]) to be inside the packet.
    pub(crate) fn copy_out_into(&self, mem: &Memory, offset: usize, out: &mut [u8]) {
        let (mut done, mut at) = (0, offset);
        for piece in std::iter::once(self.packet(mem)).chain(self.frags.iter().map(Vec::as_slice)) {
            if done == out.len() {
                break;
            }
            if at < piece.len() {
                let n = (out.len() - done).min(piece.len() - at);
                out[done..done + n].copy_from_slice(&piece[at..at + n]);
                done += n;
                at = 0;
            } else {
                at -= piece.len();
            }
        }
        debug_assert_eq!(done, out.len(), "a range inside the packet");
    }
}

/// test_run's size checks on an input of `len` bytes whose first `meta_len` are metadata:
/// the packet after the metadata is at least an Ethernet header (EINVAL) and at most what
/// the linear part and [`MAX_FRAGS`] fragments hold (ENOMEM, when test_run runs out of
/// fragments); the metadata comes on top (it lives in the headroom).
pub fn check_size(len: usize, meta_len: usize) -> Result<(), Refusal> {
    let packet = len.saturating_sub(meta_len);
    let (errno, reason) = if packet < ETH_HLEN {
        (
            Errno::EINVAL,
            format!("packet of {packet} bytes is shorter than an Ethernet header ({ETH_HLEN})"),
        )
    } else if packet > MAX_PACKET_SIZE {
        (
            Errno::ENOMEM,
            format!(
                "packet of {packet} bytes is longer than the {MAX_PACKET_SIZE} bytes an XDP \
                 frame holds ({MAX_LINEAR_SIZE} linear and {MAX_FRAGS} fragments of {FRAG_SIZE})"
            ),
        )
    } else {
        return Ok(());
    };
    Err(Refusal { errno, reason })
}

fn offset_by(at: usize, delta: i32) -> Option<usize> {
    at.checked_add_signed(delta as isize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern_of(len: usize) -> Vec<u8> {
        (0..len).map(|i| i as u8).collect()
    }

    fn frame(len: usize) -> (Memory, XdpFrame) {
        let mut mem = Memory::new();
        let packet = pattern_of(len);
        let f = XdpFrame::new(&mut mem, &packet, 1, 0).unwrap();
        (mem, f)
    }

    #[test]
    fn sizes_test_run_refuses() {
        let mut mem = Memory::new();
        for len in [0, 13] {
            let err = XdpFrame::new(&mut mem, &vec![0; len], 1, 0).unwrap_err();
            assert_eq!(err.errno, Errno::EINVAL);
        }
        let err = XdpFrame::new(&mut mem, &vec![0; MAX_PACKET_SIZE + 1], 1, 0).unwrap_err();
        assert_eq!(err.errno, Errno::ENOMEM);
        assert_eq!(MAX_PACKET_SIZE, 73152);
        for len in [14, MAX_LINEAR_SIZE, MAX_LINEAR_SIZE + 1, MAX_PACKET_SIZE] {
            assert!(
                XdpFrame::new(&mut mem, &vec![0; len], 1, 0).is_ok(),
                "{len}"
            );
        }
    }

    #[test]
    fn metadata_from_the_input_sits_in_the_headroom() {
        let mut mem = Memory::new();
        let input = pattern_of(8 + 64);
        let f = XdpFrame::with_meta(&mut mem, &input, 8, 1, 0).unwrap();
        assert_eq!((f.meta_len(), f.len()), (8, 64));
        assert_eq!(f.data_out(&mem), input);
        assert_eq!(f.packet(&mem), &input[8..]);
        let data = mem.read(f.ctx_addr(), 4).unwrap();
        let meta = mem.read(f.ctx_addr() + 8, 4).unwrap();
        assert_eq!(data - meta, 8);
        // The size limits apply to the packet after the metadata (Linux 6.18).
        assert_eq!(check_size(4 + 13, 4).unwrap_err().errno, Errno::EINVAL);
        assert!(check_size(4 + 14, 4).is_ok());
        assert!(check_size(32 + MAX_PACKET_SIZE, 32).is_ok());
        assert_eq!(
            check_size(32 + MAX_PACKET_SIZE + 1, 32).unwrap_err().errno,
            Errno::ENOMEM
        );
        // The linear part holds the metadata and up to MAX_LINEAR_SIZE packet bytes.
        let input = pattern_of(XDP_CTX_META_MAX + MAX_LINEAR_SIZE + 1);
        let f = XdpFrame::with_meta(&mut mem, &input, XDP_CTX_META_MAX, 1, 0).unwrap();
        assert_eq!((f.len(), f.frags_len()), (MAX_LINEAR_SIZE, 1));
    }

    #[test]
    fn long_packets_split_into_page_fragments() {
        let (mem, f) = frame(MAX_LINEAR_SIZE);
        assert!(!f.has_frags());
        assert_eq!(f.buff_len(), MAX_LINEAR_SIZE);
        let (mem2, f2) = frame(9000);
        assert_eq!(f2.len(), MAX_LINEAR_SIZE);
        let sizes: Vec<usize> = f2.frags().iter().map(Vec::len).collect();
        assert_eq!(sizes, [4096, 9000 - MAX_LINEAR_SIZE - 4096]);
        assert_eq!(
            (f2.frags_len(), f2.buff_len()),
            (9000 - MAX_LINEAR_SIZE, 9000)
        );
        let expect: Vec<u8> = (0..9000).map(|i| i as u8).collect();
        assert_eq!(f2.data_out(&mem2), expect);
        let (_, f3) = frame(MAX_PACKET_SIZE);
        assert_eq!(f3.frags().len(), MAX_FRAGS);
        assert!(f3.frags().iter().all(|fr| fr.len() == FRAG_SIZE));
        // The window (what the program addresses) is the linear part only.
        let data = mem2.read(f2.ctx_addr(), 4).unwrap();
        let end = mem2.read(f2.ctx_addr() + 4, 4).unwrap();
        assert_eq!(end - data, MAX_LINEAR_SIZE as u64);
        assert!(mem2.read(end, 1).is_err());
        drop(mem);
    }

    #[test]
    fn bytes_across_fragments() {
        let (mut mem, mut f) = frame(9000);
        assert_eq!(f.check_bytes(0x1_0000, 1), Err(Errno::EFAULT));
        assert_eq!(f.check_bytes(0, 0x1_0000), Err(Errno::EFAULT));
        assert_eq!(f.check_bytes(8990, 11), Err(Errno::EINVAL));
        assert_eq!(f.check_bytes(8990, 10), Ok(()));
        let at = MAX_LINEAR_SIZE - 3;
        let expect: Vec<u8> = (at..at + 4100).map(|i| i as u8).collect();
        // Linear tail, the whole first fragment, the second's head.
        assert_eq!(f.read_bytes(&mem, at as u32, 4100), Ok(expect));
        assert_eq!(f.write_bytes(&mut mem, 8990, &[1; 11]), Err(Errno::EINVAL));
        f.write_bytes(&mut mem, at as u32, &[0xee; 4100]).unwrap();
        let out = f.data_out(&mem);
        assert_eq!(out[at - 1], (at - 1) as u8);
        assert!(out[at..at + 4100].iter().all(|&b| b == 0xee));
        assert_eq!(out[at + 4100], (at + 4100) as u8);
        assert_eq!(f.read_bytes(&mem, 8999, 1), Ok(vec![(8999usize) as u8]));
        assert_eq!(f.read_bytes(&mem, 9000, 0), Ok(vec![]));
        assert_eq!(f.read_bytes(&mem, 9000, 1), Err(Errno::EINVAL));
        // Past 0xffff bytes, as bpf_perf_event_output's ctx length may go.
        let (mem, f) = frame(MAX_PACKET_SIZE);
        assert_eq!(
            f.head_bytes(&mem, MAX_PACKET_SIZE).unwrap(),
            pattern_of(MAX_PACKET_SIZE)
        );
        assert_eq!(f.head_bytes(&mem, MAX_PACKET_SIZE + 1), None);
    }

    #[test]
    fn frags_tail_grows_in_the_last_fragment_only() {
        let (mut mem, mut f) = frame(4096);
        let last = 4096 - MAX_LINEAR_SIZE;
        assert_eq!(
            f.adjust_tail(&mut mem, (FRAG_SIZE - last) as i32 + 1),
            Err(Errno::EINVAL)
        );
        assert_eq!(f.adjust_tail(&mut mem, 10), Ok(()));
        assert_eq!(f.adjust_tail(&mut mem, 0), Ok(()));
        assert_eq!(f.buff_len(), 4106);
        assert_eq!(f.data_out(&mem)[4096..], [0; 10]);
        assert_eq!(
            f.adjust_tail(&mut mem, (FRAG_SIZE - last - 10) as i32),
            Ok(())
        );
        assert_eq!(f.frags()[0].len(), FRAG_SIZE);
        assert_eq!(f.adjust_tail(&mut mem, 1), Err(Errno::EINVAL));
        assert_eq!(f.len(), MAX_LINEAR_SIZE, "the linear part never grows");
    }

    #[test]
    fn frags_tail_shrinks_and_releases_fragments() {
        let (mut mem, mut f) = frame(9000);
        // Across the last fragment into the one before.
        let second = 9000 - MAX_LINEAR_SIZE - 4096;
        assert_eq!(f.adjust_tail(&mut mem, -(second as i32) - 6), Ok(()));
        assert_eq!(f.frags().len(), 1);
        assert_eq!(f.frags()[0].len(), 4090);
        // Past every fragment into the linear part: data_end moves, the window with it.
        assert_eq!(f.adjust_tail(&mut mem, -4090 - 20), Ok(()));
        assert!(!f.has_frags());
        assert_eq!(f.len(), MAX_LINEAR_SIZE - 20);
        let end = mem.read(f.ctx_addr() + 4, 4).unwrap();
        assert!(mem.read(end, 1).is_err());
        // Now a linear frame again: it may grow back to the linear limit.
        assert_eq!(f.adjust_tail(&mut mem, 21), Err(Errno::EINVAL));
        assert_eq!(f.adjust_tail(&mut mem, 20), Ok(()));
        assert_eq!(f.data_out(&mem)[MAX_LINEAR_SIZE - 20..], [0; 20]);
    }

    #[test]
    fn frags_tail_shrink_limits() {
        let (mut mem, mut f) = frame(5000);
        assert_eq!(f.adjust_tail(&mut mem, -(5000 - 13)), Err(Errno::EINVAL));
        assert_eq!(f.buff_len(), 5000);
        // i32::MIN negates to itself in the kernel's int arithmetic: accepted, no change.
        assert_eq!(f.adjust_tail(&mut mem, i32::MIN), Ok(()));
        assert_eq!(f.buff_len(), 5000);
        assert_eq!(f.adjust_tail(&mut mem, -(5000 - 14)), Ok(()));
        assert!(!f.has_frags());
        assert_eq!(f.len(), 14);
        assert_eq!(
            f.data_out(&mem),
            (0..14).map(|i| i as u8).collect::<Vec<_>>()
        );
    }

    #[test]
    fn head_and_meta_move_in_the_linear_part_with_frags() {
        let (mut mem, mut f) = frame(4000);
        let most = (MAX_LINEAR_SIZE - ETH_HLEN) as i32;
        assert_eq!(f.adjust_head(&mut mem, most + 1), Err(Errno::EINVAL));
        assert_eq!(f.adjust_meta(&mut mem, -8), Ok(()));
        assert_eq!(f.adjust_head(&mut mem, most), Ok(()));
        assert_eq!((f.len(), f.buff_len()), (ETH_HLEN, ETH_HLEN + 480));
        let out = f.data_out(&mem);
        assert_eq!(out.len(), 8 + ETH_HLEN + 480);
        let tail: Vec<u8> = (most as usize..4000).map(|i| i as u8).collect();
        assert_eq!(out[8..], tail);
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
        let data = mem.read(f.ctx_addr(), 4).unwrap();
        let end = mem.read(f.ctx_addr() + 4, 4).unwrap();
        assert_eq!(end - data, 20);
        assert!(mem.read(end, 1).is_err());
        assert!(mem.read(data - 1, 1).is_err());
        f.adjust_tail(&mut mem, 4).unwrap();
        assert_eq!(mem.read(end, 4).unwrap(), 0);
        f.adjust_meta(&mut mem, -4).unwrap();
        assert_eq!(mem.read(f.ctx_addr() + 8, 4).unwrap(), data - 4);
        assert_eq!(mem.read(data - 4, 4).unwrap(), 0);
    }

    #[test]
    fn byte_checks_of_a_linear_frame() {
        let (mem, f) = frame(64);
        assert_eq!(f.check_bytes(0x1_0000, 1), Err(Errno::EFAULT));
        assert_eq!(f.check_bytes(0, 0x1_0000), Err(Errno::EFAULT));
        assert_eq!(f.check_bytes(60, 5), Err(Errno::EINVAL));
        assert_eq!(f.check_bytes(60, 4), Ok(()));
        assert_eq!(f.read_bytes(&mem, 60, 4), Ok(vec![60, 61, 62, 63]));
    }
}

//! `bpf_trace_printk`, `bpf_trace_vprintk` (kernel/trace/bpf_trace.c) and `bpf_snprintf`
//! (kernel/bpf/helpers.c); the formatting itself is [`super::bprintf`].
//!
//! What `bpf_trace_printk` prints is captured as a line of the outcome (without the trace
//! pipe's `[timestamp] task-pid` prefix, and without one trailing newline).

use super::bprintf::{MAX_BPRINTF_BUF, format};
use super::misc::read_cstr;
use super::{HelperResult, XdpEnv, ret};
use crate::helpers::HelperError;
use crate::maps::Errno;
use crate::memory::Memory;
/// `MAX_TRACE_PRINTK_VARARGS`.
const TRACE_PRINTK_ARGS: usize = 3;
/// `MAX_BPRINTF_VARARGS`.
const SNPRINTF_ARGS: u64 = 12;

/// `bpf_trace_printk(fmt, fmt_size, arg1, arg2, arg3)`: answers the formatted length.
pub fn trace_printk(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    print_line(env, mem, a[0], a[1], &a[2..2 + TRACE_PRINTK_ARGS])
}

/// `bpf_trace_vprintk(fmt, fmt_size, data, data_len)` (kernel/trace/bpf_trace.c): as
/// `bpf_trace_printk` with its arguments in an array of u64 (up to 12; `data_len` a multiple
/// of 8, and `data` not NULL when it is not 0, else -EINVAL).
pub fn trace_vprintk(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    let [fmt, fmt_size, data, data_len, _] = a;
    let args = match read_args(mem, data, data_len)? {
        Ok(args) => args,
        Err(e) => return ret(e.as_ret()),
    };
    print_line(env, mem, fmt, fmt_size, &args)
}

/// The u64 arguments of `bpf_snprintf` and `bpf_trace_vprintk`, or the kernel's errno for a
/// length it refuses.
fn read_args(
    mem: &Memory,
    data: u64,
    data_len: u64,
) -> Result<Result<Vec<u64>, Errno>, HelperError> {
    let data_len = data_len as u32 as u64;
    if !data_len.is_multiple_of(8) || data_len > SNPRINTF_ARGS * 8 || (data_len != 0 && data == 0) {
        return Ok(Err(Errno::EINVAL));
    }
    Ok(Ok((0..data_len / 8)
        .map(|i| mem.read(data + 8 * i, 8))
        .collect::<Result<_, _>>()?))
}

/// Formats a trace line from `fmt` (which must hold a NUL within `fmt_size`) and records it.
fn print_line(
    env: &mut XdpEnv<'_>,
    mem: &Memory,
    fmt: u64,
    fmt_size: u64,
    args: &[u64],
) -> HelperResult {
    let fmt = mem.slice(fmt, fmt_size as u32 as usize)?;
    let Some(end) = fmt.iter().position(|&b| b == 0) else {
        return ret(Errno::EINVAL.as_ret());
    };
    let text = match format(&fmt[..end], args, mem, MAX_BPRINTF_BUF) {
        Ok(text) => text,
        Err(e) => return ret(e.as_ret()),
    };
    let mut shown = text.written;
    shown.truncate(MAX_BPRINTF_BUF - 1);
    if shown.ends_with(b"\n") {
        shown.pop();
    }
    // Each byte is a char of its own (Latin-1), as the trace pipe's bytes show in a terminal.
    let mut line = String::with_capacity(shown.len() * 2);
    line.extend(shown.iter().map(|&b| b as char));
    env.run.printk.push(line);
    ret(text.len as u64)
}

/// `bpf_snprintf(str, str_size, fmt, data, data_len)`: writes at most `str_size` bytes with a
/// NUL; answers the formatted length plus one.
pub fn snprintf(_env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    let [out, out_size, fmt, data, data_len] = a;
    let args = match read_args(mem, data, data_len)? {
        Ok(args) => args,
        Err(e) => return ret(e.as_ret()),
    };
    let Some(fmt) = read_cstr(mem, fmt, usize::MAX >> 1) else {
        return ret(Errno::EINVAL.as_ret());
    };
    let size = out_size as u32 as usize;
    let text = match format(&fmt, &args, mem, size) {
        Ok(text) => text,
        Err(e) => return ret(e.as_ret()),
    };
    if size > 0 {
        let n = text.len.min(size - 1);
        let dst = mem.slice_mut(out, n + 1)?;
        dst[..n].copy_from_slice(&text.written[..n]);
        dst[n] = 0;
    }
    ret(text.len as u64 + 1)
}

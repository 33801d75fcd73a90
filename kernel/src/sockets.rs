//! Real sockets for a [`SocketTable`], opened in the calling thread's network namespace, so
//! that the kernel's socket lookups in `BPF_PROG_TEST_RUN` (which searches that namespace:
//! the test device is its loopback) find what bpfemu's table describes.
//!
//! Every socket is given `SO_REUSEADDR` before it binds (so a table may hold two UDP sockets
//! on one address, as daemons that set it can). Sockets are created in the table's order (the kernel's hash chains put the newest first,
//! which decides ties). A listener is bound and listens; a UDP socket is bound, and connected
//! when it has a peer. An established TCP socket is made with its peer, which the table must
//! list too: the connecting end binds its `local` address and connects to the accepted end's
//! `local`, where a listener of the table (created before, bound there or to the wildcard)
//! or, if none, a listener made for the occasion and closed at once accepts it.
//!
//! Not made: a socket whose `rx_queue_mapping` is set (no system call sets it).

use crate::netns::NetnsError;
use bpfemu_vm::sockets::{Protocol, Socket, SocketTable};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The open sockets of a table, closed when dropped.
#[derive(Debug)]
pub struct OpenSockets {
    _fds: Vec<OwnedFd>,
}

fn err(index: usize, what: impl std::fmt::Display) -> NetnsError {
    NetnsError(format!("sockets[{index}]: {what}"))
}

/// The last system call's error, named.
fn os_err(index: usize, call: &str) -> NetnsError {
    err(
        index,
        format!("{call}: {}", std::io::Error::last_os_error()),
    )
}

impl OpenSockets {
    /// Opens every socket of `table` in the calling thread's namespace.
    pub fn open(table: &SocketTable) -> Result<OpenSockets, NetnsError> {
        let mut fds: Vec<Option<OwnedFd>> = (0..table.sockets.len()).map(|_| None).collect();
        for (index, sk) in table.sockets.iter().enumerate() {
            if sk.rx_queue_mapping != -1 {
                return Err(err(
                    index,
                    "rx_queue_mapping cannot be set on a real socket",
                ));
            }
            if fds[index].is_some() {
                continue; // made with its peer
            }
            match (sk.protocol, sk.listening, sk.remote) {
                (Protocol::Tcp, true, _) => {
                    let fd = bound(index, sk, libc::SOCK_STREAM)?;
                    check(index, "listen", listen(&fd))?;
                    fds[index] = Some(fd);
                }
                (Protocol::Udp, _, remote) => {
                    let fd = bound(index, sk, libc::SOCK_DGRAM)?;
                    if let Some(remote) = remote {
                        connect(index, &fd, remote)?;
                    }
                    fds[index] = Some(fd);
                }
                (Protocol::Tcp, false, _) => {
                    let (connecting, accepted) = pair(table, index)?;
                    let (c, a) = connection(table, &fds, connecting, accepted)?;
                    fds[connecting] = Some(c);
                    fds[accepted] = Some(a);
                }
            }
        }
        Ok(OpenSockets {
            _fds: fds.into_iter().flatten().collect(),
        })
    }
}

/// The connecting and the accepted end of the connection `index` is an end of.
fn pair(table: &SocketTable, index: usize) -> Result<(usize, usize), NetnsError> {
    let sk = &table.sockets[index];
    let peer = table.sockets.iter().position(|p| {
        p.protocol == Protocol::Tcp
            && !p.listening
            && p.accepted != sk.accepted
            && p.remote.is_some_and(|r| same_endpoint(r, sk.local))
            && sk.remote.is_some_and(|r| same_endpoint(r, p.local))
    });
    let Some(peer) = peer else {
        return Err(err(
            index,
            "an established socket is made with its peer: list the other end (local and \
             remote swapped, one of the two `accepted`)",
        ));
    };
    Ok(if sk.accepted {
        (peer, index)
    } else {
        (index, peer)
    })
}

/// Makes the connection between `connecting` and `accepted`: the accepting listener is the
/// table's (already open) or a temporary one.
fn connection(
    table: &SocketTable,
    fds: &[Option<OwnedFd>],
    connecting: usize,
    accepted: usize,
) -> Result<(OwnedFd, OwnedFd), NetnsError> {
    // The accepted end's address as the connecting end's family spells it.
    let target = table.sockets[connecting]
        .remote
        .expect("an established socket's peer");
    let listed = table.sockets.iter().enumerate().rev().find(|(i, l)| {
        fds[*i].is_some()
            && l.protocol == Protocol::Tcp
            && l.listening
            && (same_endpoint(l.local, table.sockets[accepted].local)
                || (l.local.port() == target.port() && l.local.ip().is_unspecified()))
    });
    let temporary;
    let listener = match listed {
        Some((i, _)) => fds[i].as_ref().expect("open"),
        None => {
            let mut sk = table.sockets[accepted].clone();
            (sk.listening, sk.remote, sk.mark, sk.priority) = (true, None, 0, 0);
            temporary = bound(accepted, &sk, libc::SOCK_STREAM)?;
            check(accepted, "listen", listen(&temporary))?;
            &temporary
        }
    };
    let client = bound(connecting, &table.sockets[connecting], libc::SOCK_STREAM)?;
    connect(connecting, &client, target)?;
    wait_for_connection(accepted, listener)?;
    // SAFETY: accept4 on an open listening socket, without an address buffer.
    let raw = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(os_err(accepted, "accept"));
    }
    // SAFETY: accept4 returned a new descriptor that nothing else owns.
    let child = unsafe { OwnedFd::from_raw_fd(raw) };
    options(accepted, &child, &table.sockets[accepted], false)?;
    Ok((client, child))
}

/// Waits (a second at most) until `listener` has a connection to accept: the loopback
/// completes a handshake at once, and a connection that went to another listener must fail
/// the build rather than block it.
fn wait_for_connection(index: usize, listener: &OwnedFd) -> Result<(), NetnsError> {
    let mut pfd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll(2) on one pollfd that lives across the call.
    let rc = unsafe { libc::poll(&raw mut pfd, 1, 1000) };
    match rc {
        0 => Err(err(
            index,
            "the connection did not reach the listener expected to accept it",
        )),
        rc => check(index, "poll", rc),
    }
}

/// The same address and port, an IPv4-mapped IPv6 address being its IPv4 one.
fn same_endpoint(a: SocketAddr, b: SocketAddr) -> bool {
    let ip = |s: SocketAddr| s.ip().to_canonical();
    a.port() == b.port() && ip(a) == ip(b)
}

/// A socket of `kind` with `sk`'s options, bound to its local address.
fn bound(index: usize, sk: &Socket, kind: libc::c_int) -> Result<OwnedFd, NetnsError> {
    let family = match sk.local {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    // SAFETY: socket(2) with constant arguments.
    let raw = unsafe { libc::socket(family, kind | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(os_err(index, "socket"));
    }
    // SAFETY: socket returned a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    setsockopt(
        index,
        &fd,
        libc::SOL_SOCKET,
        libc::SO_REUSEADDR,
        1,
        "SO_REUSEADDR",
    )?;
    if family == libc::AF_INET6 {
        let v6only = i32::from(sk.v6only);
        setsockopt(
            index,
            &fd,
            libc::IPPROTO_IPV6,
            libc::IPV6_V6ONLY,
            v6only,
            "IPV6_V6ONLY",
        )?;
    }
    options(index, &fd, sk, true)?;
    let (addr, len) = sockaddr(sk.local);
    // SAFETY: `addr` is a sockaddr of `len` bytes that lives across the call.
    let rc = unsafe { libc::bind(fd.as_raw_fd(), (&raw const addr).cast(), len) };
    check(index, &format!("bind {}", sk.local), rc)?;
    Ok(fd)
}

/// `SO_BINDTOIFINDEX`, `SO_MARK` and `SO_PRIORITY`: what the table sets on a new socket
/// (before it is bound), and all three on an accepted one, which inherited its listener's.
fn options(index: usize, fd: &OwnedFd, sk: &Socket, new: bool) -> Result<(), NetnsError> {
    let all = !new;
    if sk.bound_dev_if != 0 || all {
        let dev = sk.bound_dev_if as i32;
        setsockopt(
            index,
            fd,
            libc::SOL_SOCKET,
            libc::SO_BINDTOIFINDEX,
            dev,
            "SO_BINDTOIFINDEX",
        )?;
    }
    if sk.mark != 0 || all {
        setsockopt(
            index,
            fd,
            libc::SOL_SOCKET,
            libc::SO_MARK,
            sk.mark as i32,
            "SO_MARK",
        )?;
    }
    if sk.priority != 0 || all {
        let priority = sk.priority as i32;
        setsockopt(
            index,
            fd,
            libc::SOL_SOCKET,
            libc::SO_PRIORITY,
            priority,
            "SO_PRIORITY",
        )?;
    }
    Ok(())
}

fn setsockopt(
    index: usize,
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
    shown: &str,
) -> Result<(), NetnsError> {
    // SAFETY: an int option read from a local that lives across the call.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&raw const value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    check(index, shown, rc)
}

fn connect(index: usize, fd: &OwnedFd, to: SocketAddr) -> Result<(), NetnsError> {
    let (addr, len) = sockaddr(to);
    // SAFETY: `addr` is a sockaddr of `len` bytes that lives across the call.
    let rc = unsafe { libc::connect(fd.as_raw_fd(), (&raw const addr).cast(), len) };
    check(index, &format!("connect {to}"), rc)
}

fn listen(fd: &OwnedFd) -> libc::c_int {
    // SAFETY: listen(2) on an open socket.
    unsafe { libc::listen(fd.as_raw_fd(), 16) }
}

fn check(index: usize, call: &str, rc: libc::c_int) -> Result<(), NetnsError> {
    if rc < 0 {
        Err(os_err(index, call))
    } else {
        Ok(())
    }
}

/// `addr` as a `sockaddr_storage` and its length.
fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data, valid all zero.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: a sockaddr_in fits in a sockaddr_storage, which is aligned for it.
            unsafe { std::ptr::write((&raw mut storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: 0,
            };
            // SAFETY: a sockaddr_in6 fits in a sockaddr_storage, which is aligned for it.
            unsafe { std::ptr::write((&raw mut storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

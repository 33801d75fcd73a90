//! Private network namespaces for the kernel comparisons that depend on a namespace's state
//! (`bpf_fib_lookup`, devmap values, a ctx's ingress device).
//!
//! - [`Netns`]: a namespace created with `ip netns add` and deleted (with every interface in
//!   it) when dropped; `ip` and sysctl commands run in it. A process killed before the drop
//!   (SIGKILL, a SIGINT the process does not handle) leaves its name in `/run/netns`: creating a
//!   namespace deletes the names of its prefix whose process is gone.
//! - [`Netns::into_held`] gives up the name once the setup is done: an open descriptor alone
//!   then keeps the namespace, and the kernel frees it when the process ends, however it ends.
//!   Commands that may be killed (`bpfemu diff`, `bench`) hold theirs so.
//! - [`Netns::enter`] moves the calling thread into it until the returned guard drops
//!   (`setns(2)` is per thread: BPF_PROG_TEST_RUN, devmap updates and device lookups then see
//!   the namespace); [`Netns::run_in`] runs a closure on a thread of its own inside it.
//! - [`Netns::from_fib`] builds the namespace a [`Fib`] describes: the same interfaces at the
//!   same ifindexes (veth devices, each with a peer kept out of the file's ifindexes), MACs,
//!   MTUs, addresses, forwarding switches, routes and neighbours; [`interface_steps`] and
//!   [`route_steps`] are the commands.
//!
//! ```no_run
//! use bpfemu_kernel::netns::Netns;
//! use bpfemu_vm::fib::Fib;
//! let fib = Fib::from_json_file("examples/fib/router.json".as_ref()).unwrap();
//! let ns = Netns::from_fib("bpfemu-doc", &fib).unwrap();
//! let eth1 = ns.run_in(|| std::fs::read_to_string("/sys/class/net/eth1/ifindex").unwrap());
//! assert_eq!(eth1.trim(), "3");
//! ```
//!
//! Not built: custom policy rules, lightweight tunnels (`encap`), dead nexthops, tentative or
//! temporary addresses (they are refused with a message). IPv6 link-local addresses are not
//! generated (`addr_gen_mode none`), so the namespace holds exactly the file's addresses.

use bpfemu_vm::fib::{Fib, Route, RouteType};
use std::fs::File;
use std::io::Write as _;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Why a namespace could not be built or entered.
#[derive(Debug, thiserror::Error)]
#[error("network namespace: {0}")]
pub struct NetnsError(pub String);

/// Ifindexes of the veth peers: this plus the interface's ifindex.
pub const PEER_IFINDEX_BASE: u32 = 10_000;

/// A private network namespace, deleted on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

/// A namespace without a name, kept by an open descriptor: see [`Netns::into_held`].
#[derive(Debug)]
pub struct HeldNetns {
    ns: File,
    name: String,
}

/// The calling thread inside a namespace; it returns to its previous namespace on drop. Drop
/// it on the thread that entered.
#[derive(Debug)]
pub struct Entered {
    previous: File,
}

/// One command of a namespace's setup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A line for `ip -batch` (an `ip` command without the `ip`).
    Ip(String),
    /// A sysctl: the path under `/proc/sys` and the value.
    Sysctl(String, String),
}

fn err(message: impl Into<String>) -> NetnsError {
    NetnsError(message.into())
}

impl Netns {
    /// Creates an empty namespace named `PREFIX-PID-N`.
    pub fn create(prefix: &str) -> Result<Netns, NetnsError> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        delete_orphans(prefix);
        let name = format!(
            "{prefix}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let out = Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .map_err(|e| err(format!("cannot run `ip`: {e}")))?;
        if !out.status.success() {
            return Err(err(format!(
                "`ip netns add {name}` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(Netns { name })
    }

    /// A namespace built from a FIB: see the module docs.
    pub fn from_fib(prefix: &str, fib: &Fib) -> Result<Netns, NetnsError> {
        let ns = Netns::create(prefix)?;
        ns.apply(&interface_steps(fib)?)?;
        let present =
            Fib::from_system(Some(&ns.name)).map_err(|e| err(format!("snapshot: {e}")))?;
        ns.apply(&route_steps(fib, &present)?)?;
        for iface in &fib.interfaces {
            let got = ns.ifindex(&iface.name)?;
            if got != iface.ifindex {
                return Err(err(format!(
                    "{} has ifindex {got} in the namespace, {} in the FIB",
                    iface.name, iface.ifindex
                )));
            }
        }
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip -n NAME ARGS...`.
    pub fn ip(&self, args: &[&str]) -> Result<(), NetnsError> {
        let out = Command::new("ip")
            .args(["-n", &self.name])
            .args(args)
            .output()
            .map_err(|e| err(format!("cannot run `ip`: {e}")))?;
        if !out.status.success() {
            return Err(err(format!(
                "`ip -n {} {}` failed: {}",
                self.name,
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    /// Runs the steps in order: consecutive `ip` lines as one `ip -batch`, consecutive sysctls
    /// as one shell inside the namespace.
    pub fn apply(&self, steps: &[Step]) -> Result<(), NetnsError> {
        let mut i = 0;
        while i < steps.len() {
            let ip = matches!(steps[i], Step::Ip(_));
            let run: Vec<&Step> = steps[i..]
                .iter()
                .take_while(|s| matches!(s, Step::Ip(_)) == ip)
                .collect();
            i += run.len();
            if ip {
                let lines: Vec<&str> = run
                    .iter()
                    .map(|s| match s {
                        Step::Ip(l) => l.as_str(),
                        Step::Sysctl(..) => unreachable!(),
                    })
                    .collect();
                self.ip_batch(&lines)?;
            } else {
                let script: Vec<String> = run
                    .iter()
                    .map(|s| match s {
                        Step::Sysctl(k, v) => format!("echo {v} > /proc/sys/{k}"),
                        Step::Ip(_) => unreachable!(),
                    })
                    .collect();
                self.sh(&script.join(" && "))?;
            }
        }
        Ok(())
    }

    fn ip_batch(&self, lines: &[&str]) -> Result<(), NetnsError> {
        let mut child = Command::new("ip")
            .args(["-n", &self.name, "-batch", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| err(format!("cannot run `ip`: {e}")))?;
        let mut stdin = child.stdin.take().expect("piped");
        stdin
            .write_all((lines.join("\n") + "\n").as_bytes())
            .map_err(|e| err(format!("ip -batch: {e}")))?;
        drop(stdin);
        let out = child
            .wait_with_output()
            .map_err(|e| err(format!("ip -batch: {e}")))?;
        if !out.status.success() {
            return Err(err(format!(
                "`ip -n {} -batch` failed: {}\ncommands:\n{}",
                self.name,
                String::from_utf8_lossy(&out.stderr).trim(),
                lines.join("\n")
            )));
        }
        Ok(())
    }

    /// Runs a shell command inside the namespace (`ip netns exec`).
    pub fn sh(&self, script: &str) -> Result<(), NetnsError> {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.name, "sh", "-c", script])
            .output()
            .map_err(|e| err(format!("cannot run `ip netns exec`: {e}")))?;
        if !out.status.success() {
            return Err(err(format!(
                "`{script}` in {}: {}",
                self.name,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    /// Sets `net.x.y` style sysctls inside the namespace.
    pub fn sysctl(&self, key: &str, value: &str) -> Result<(), NetnsError> {
        self.apply(&[Step::Sysctl(key.replace('.', "/"), value.to_owned())])
    }

    /// The ifindex of a device in the namespace.
    pub fn ifindex(&self, dev: &str) -> Result<u32, NetnsError> {
        let out = Command::new("ip")
            .args(["-n", &self.name, "-j", "link", "show", dev])
            .output()
            .map_err(|e| err(format!("cannot run `ip`: {e}")))?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| err(format!("ip -j link show {dev}: {e}")))?;
        v[0]["ifindex"]
            .as_u64()
            .map(|i| i as u32)
            .ok_or_else(|| err(format!("no device {dev} in {}", self.name)))
    }

    /// Moves the calling thread into the namespace until the guard drops.
    pub fn enter(&self) -> Result<Entered, NetnsError> {
        let target = File::open(format!("/run/netns/{}", self.name))
            .map_err(|e| err(format!("cannot open /run/netns/{}: {e}", self.name)))?;
        enter(&target, &self.name)
    }

    /// Keeps the namespace by a descriptor and deletes its name (the drop's `ip netns del`),
    /// so that nothing outlives the process: no `ip`, sysctl or name-based call works on it
    /// afterwards, [`HeldNetns::enter`] does.
    pub fn into_held(self) -> Result<HeldNetns, NetnsError> {
        let path = format!("/run/netns/{}", self.name);
        let ns = File::open(&path).map_err(|e| err(format!("cannot open {path}: {e}")))?;
        let name = self.name.clone();
        drop(self);
        if std::path::Path::new(&path).exists() {
            return Err(err(format!("`ip netns del {name}` left {path}")));
        }
        Ok(HeldNetns { ns, name })
    }

    /// Runs `f` on a new thread inside the namespace and returns its result (a panic in `f`
    /// is passed on).
    pub fn run_in<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| {
            s.spawn(|| {
                let _inside = self.enter().unwrap_or_else(|e| panic!("{e}"));
                f()
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }
}

impl HeldNetns {
    /// Moves the calling thread into the namespace until the guard drops.
    pub fn enter(&self) -> Result<Entered, NetnsError> {
        enter(&self.ns, &self.name)
    }

    /// The name it had, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }
}

fn enter(target: &File, name: &str) -> Result<Entered, NetnsError> {
    let previous = File::open("/proc/thread-self/ns/net")
        .map_err(|e| err(format!("cannot open this thread's namespace: {e}")))?;
    // SAFETY: setns on a namespace fd that stays open for the call; it changes only the
    // calling thread's network namespace.
    let rc = unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(err(format!(
            "setns into {name}: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(Entered { previous })
}

/// The process a `PREFIX-PID-N` name was made by, when the name has that form.
fn creator(prefix: &str, name: &str) -> Option<u32> {
    let rest = name.strip_prefix(prefix)?.strip_prefix('-')?;
    let (pid, n) = rest.split_once('-')?;
    n.parse::<u32>().ok()?;
    pid.parse().ok()
}

/// Deletes the `PREFIX-PID-N` namespaces whose process no longer runs: a process killed
/// before its drop could not. Best effort: a failure here is not the caller's.
fn delete_orphans(prefix: &str) {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = creator(prefix, &name) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip")
                .args(["netns", "del", &name])
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        // SAFETY: setns back into the namespace the thread came from, through an fd this
        // guard kept open.
        let rc = unsafe { libc::setns(self.previous.as_raw_fd(), libc::CLONE_NEWNET) };
        if rc != 0 {
            eprintln!(
                "warning: cannot return to the previous network namespace: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

fn sysctl(key: String, value: impl ToString) -> Step {
    Step::Sysctl(key, value.to_string())
}

fn mac(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The interfaces of a FIB: namespace-wide sysctls (forwarding on, no DAD, no generated
/// link-local addresses), each interface as a veth at its ifindex with its MAC and MTU (the
/// loopback, ifindex 1, exists already), up or down, its addresses, per-device sysctls.
pub fn interface_steps(fib: &Fib) -> Result<Vec<Step>, NetnsError> {
    let mut steps = Vec::new();
    for fam in ["ipv4", "ipv6"] {
        for scope in ["all", "default"] {
            steps.push(sysctl(format!("net/{fam}/conf/{scope}/forwarding"), 1));
        }
    }
    for scope in ["all", "default"] {
        steps.push(sysctl(format!("net/ipv6/conf/{scope}/accept_dad"), 0));
    }
    steps.push(sysctl("net/ipv6/conf/default/addr_gen_mode".into(), 1));
    let mut after = Vec::new();
    for iface in &fib.interfaces {
        let name = &iface.name;
        if iface.ifindex >= PEER_IFINDEX_BASE {
            return Err(err(format!(
                "{name}: ifindex {} collides with the veth peers' (from {PEER_IFINDEX_BASE})",
                iface.ifindex
            )));
        }
        let lo = iface.ifindex == 1;
        if lo {
            if name != "lo" {
                return Err(err(format!(
                    "ifindex 1 is the loopback device `lo`, not {name}"
                )));
            }
            steps.push(Step::Ip(format!("link set lo mtu {}", iface.mtu)));
        } else {
            let peer = PEER_IFINDEX_BASE + iface.ifindex;
            steps.push(Step::Ip(format!(
                "link add {name} index {} address {} mtu {} type veth peer name bpfemu-p{} index {peer}",
                iface.ifindex,
                mac(&iface.mac),
                iface.mtu,
                iface.ifindex
            )));
            steps.push(Step::Ip(format!("link set bpfemu-p{} up", iface.ifindex)));
        }
        if iface.up {
            steps.push(Step::Ip(format!("link set {name} up")));
        }
        for a in &iface.addrs {
            if a.tentative || a.temporary {
                return Err(err(format!(
                    "{name}: {}: tentative and temporary addresses are not built",
                    a.addr
                )));
            }
            // The loopback gets these as it comes up.
            let default_lo = match a.addr {
                IpAddr::V4(v4) => v4.octets() == [127, 0, 0, 1] && a.prefix_len == 8,
                IpAddr::V6(v6) => v6.is_loopback(),
            };
            if lo && default_lo {
                continue;
            }
            let mut line = format!("addr add {}/{} dev {name}", a.addr, a.prefix_len);
            match a.addr {
                IpAddr::V4(_) => line.push_str(&format!(" scope {}", a.scope)),
                IpAddr::V6(_) => line.push_str(" nodad"),
            }
            if a.deprecated {
                line.push_str(" preferred_lft 0");
            }
            steps.push(Step::Ip(line));
        }
        if !iface.forwarding_v4 {
            after.push(sysctl(format!("net/ipv4/conf/{name}/forwarding"), 0));
        }
        if !iface.forwarding_v6 {
            after.push(sysctl(format!("net/ipv6/conf/{name}/forwarding"), 0));
        }
        if let Some(mtu6) = iface.mtu6 {
            after.push(sysctl(format!("net/ipv6/conf/{name}/mtu"), mtu6));
        }
    }
    steps.extend(after);
    Ok(steps)
}

fn same_route(a: &Route, b: &Route) -> bool {
    (a.table, a.dst, a.kind, a.dev, a.gateway, a.metric)
        == (b.table, b.dst, b.kind, b.dev, b.gateway, b.metric)
}

/// The routes of a FIB that `present` (the namespace after [`interface_steps`]: the routes the
/// kernel derived from the addresses) lacks, and the neighbours.
pub fn route_steps(fib: &Fib, present: &Fib) -> Result<Vec<Step>, NetnsError> {
    if fib.rules_v4.is_some() || fib.rules_v6.is_some() {
        return Err(err("custom policy rules are not built"));
    }
    let dev_name = |ifindex: u32| {
        fib.interface(ifindex)
            .map(|i| i.name.clone())
            .ok_or_else(|| err(format!("no interface with ifindex {ifindex}")))
    };
    let mut steps = Vec::new();
    for r in &fib.routes {
        if present.routes.iter().any(|p| same_route(p, r)) {
            continue;
        }
        if r.encap || r.dead {
            return Err(err(format!(
                "route to {:?}: tunnels and dead nexthops are not built",
                r.dst
            )));
        }
        let kind = match r.kind {
            RouteType::Unicast => "",
            RouteType::Local => "local ",
            RouteType::Broadcast => "broadcast ",
            RouteType::Anycast => "anycast ",
            RouteType::Multicast => "multicast ",
            RouteType::Blackhole => "blackhole ",
            RouteType::Unreachable => "unreachable ",
            RouteType::Prohibit => "prohibit ",
            RouteType::Throw => "throw ",
        };
        let mut line = format!("route add {kind}{}/{}", r.dst.addr, r.dst.len);
        if let Some(gw) = r.gateway {
            let inet6 = if gw.is_ipv6() && r.dst.is_ipv4() {
                "inet6 "
            } else {
                ""
            };
            line.push_str(&format!(" via {inet6}{gw}"));
        }
        if let Some(dev) = r.dev {
            line.push_str(&format!(" dev {}", dev_name(dev)?));
        }
        line.push_str(&format!(" metric {} table {}", r.metric, r.table));
        if let Some(src) = r.prefsrc {
            line.push_str(&format!(" src {src}"));
        }
        if r.dst.is_ipv4() {
            line.push_str(&format!(" scope {}", r.scope));
        }
        if r.mtu != 0 {
            let lock = if r.mtu_lock { "lock " } else { "" };
            line.push_str(&format!(" mtu {lock}{}", r.mtu));
        }
        steps.push(Step::Ip(line));
    }
    for n in &fib.neighbours {
        let state = format!("{:?}", n.state).to_ascii_lowercase();
        let lladdr = if n.state.is_valid() {
            format!(" lladdr {}", mac(&n.mac))
        } else {
            String::new()
        };
        steps.push(Step::Ip(format!(
            "neigh add {}{lladdr} dev {} nud {state}",
            n.ip,
            dev_name(n.dev)?
        )));
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn router_fib_becomes_ip_commands() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/fib/router.json");
        let fib = Fib::from_json_file(path.as_ref()).unwrap();
        let ifs = interface_steps(&fib).unwrap();
        assert!(
            ifs.contains(&Step::Ip(
                "link add eth1 index 3 address 02:00:00:00:01:01 mtu 1500 type veth peer name \
             bpfemu-p3 index 10003"
                    .into()
            ))
        );
        assert!(ifs.contains(&Step::Ip(
            "addr add 2001:db8:ff01::1/64 dev eth1 nodad".into()
        )));
        assert!(
            !ifs.iter()
                .any(|s| matches!(s, Step::Ip(l) if l.contains("127.0.0.1")))
        );
        // Nothing present yet: every route, then the neighbours.
        let routes = route_steps(&fib, &Fib::default()).unwrap();
        assert!(routes.contains(&Step::Ip(
            "route add 192.0.2.4/30 via 10.0.2.2 dev eth2 metric 0 table 254 scope 0 mtu lock 1400"
                .into()
        )));
        assert!(routes.contains(&Step::Ip(
            "route add blackhole 192.0.2.12/30 metric 0 table 254 scope 0".into()
        )));
        assert!(routes.contains(&Step::Ip(
            "neigh add 10.0.2.2 lladdr 02:00:00:00:02:02 dev eth2 nud permanent".into()
        )));
        // What the kernel already has is left out.
        let all = route_steps(&fib, &fib).unwrap();
        assert_eq!(all.len(), fib.neighbours.len());
    }
}

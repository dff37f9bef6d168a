//! A test network of "hosts": one network namespace each, joined by veth pairs to one
//! bridge in the root namespace, where the test process itself sits (the bridge's own
//! address), so it reaches every host as a client on the same network would.
//!
//! Names are unique per run (the test process's id and a random tag), so two runs never
//! meet. Dropping the [`Network`] kills whatever still runs in its namespaces and removes
//! them, the veths and the bridge, also when the test panics; a run killed outright
//! (SIGKILL, no unwinding) leaves its namespaces behind, and the next run removes those
//! of test processes that no longer exist.

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::{Duration, Instant};

/// Every namespace of this harness is named `quire-fleet-<pid>-<tag>-<host>`.
const PREFIX: &str = "quire-fleet-";

/// One host: its namespace and, per network interface, the address and the root-side
/// end of its veth (the cable the test pulls).
pub struct Host {
    pub netns: String,
    pub address: Ipv4Addr,
    link: String,
    /// More interfaces of this host (`Network::add_interface`): address and root side.
    extra: Vec<(Ipv4Addr, String)>,
}

pub struct Network {
    tag: String,
    bridge: String,
    /// The first three octets of the /24 every host's address is in.
    subnet: [u8; 3],
    /// The next host number to hand out (.1 is the bridge, the test process).
    next: u8,
    links: u8,
    hosts: Vec<(String, Host)>,
}

/// Runs `ip` with `args`, panicking with its stderr on failure.
fn ip(args: &[&str]) {
    let output = Command::new("ip")
        .args(args)
        .output()
        .expect("run ip (iproute2; scripts/test installs it)");
    assert!(
        output.status.success(),
        "ip {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs `ip` with `args`, ignoring failure (cleanup of what may already be gone).
fn ip_quietly(args: &[&str]) -> String {
    Command::new("ip")
        .args(args)
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).into_owned())
        .unwrap_or_default()
}

fn netns_names() -> Vec<String> {
    ip_quietly(&["netns", "list"])
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .collect()
}

/// SIGKILLs every process in `netns` until none is left (5 s at most), then removes it.
fn remove_netns(netns: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let pids: Vec<i32> = ip_quietly(&["netns", "pids", netns])
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect();
        if pids.is_empty() || Instant::now() > deadline {
            break;
        }
        let _ = Command::new("kill")
            .arg("-KILL")
            .args(pids.iter().map(i32::to_string))
            .output();
        std::thread::sleep(Duration::from_millis(50));
    }
    ip_quietly(&["netns", "del", netns]);
}

/// Removes the namespaces (and bridges) of runs whose test process no longer exists.
fn sweep_stale_runs() {
    for netns in netns_names() {
        let Some(rest) = netns.strip_prefix(PREFIX) else {
            continue;
        };
        let mut parts = rest.splitn(3, '-');
        let (Some(pid), Some(tag)) = (parts.next(), parts.next()) else {
            continue;
        };
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        remove_netns(&netns);
        ip_quietly(&["link", "del", &format!("qf{tag}br")]);
    }
}

impl Network {
    /// An empty network: the bridge, with the test process at `.1`.
    pub fn new() -> Self {
        let uid = Command::new("id").arg("-u").output().expect("run id");
        assert!(
            uid.stdout.starts_with(b"0\n"),
            "the multi-host test makes network namespaces: run it as root (CI does)"
        );
        sweep_stale_runs();
        // Six hex digits keep every interface name within the kernel's 15 characters.
        let tag = uuid::Uuid::new_v4().simple().to_string()[..6].to_owned();
        let subnet = free_subnet();
        let bridge = format!("qf{tag}br");
        ip(&["link", "add", &bridge, "type", "bridge"]);
        let network = Self {
            tag,
            bridge,
            subnet,
            next: 2,
            links: 0,
            hosts: Vec::new(),
        };
        let cidr = format!("{}/24", network.address_of(1));
        ip(&["addr", "add", &cidr, "dev", &network.bridge]);
        ip(&["link", "set", &network.bridge, "up"]);
        network
    }

    fn address_of(&self, host: u8) -> Ipv4Addr {
        let [a, b, c] = self.subnet;
        Ipv4Addr::new(a, b, c, host)
    }

    /// The network every host is on, as CIDR (what a server trusts its clients from).
    pub fn cidr(&self) -> String {
        format!("{}/24", self.address_of(0))
    }

    /// A veth whose root side joins the bridge and whose other side becomes `device` in
    /// `netns`, with the next free address; returns the address and the root side.
    fn cable(&mut self, netns: &str, device: &str) -> (Ipv4Addr, String) {
        let address = self.address_of(self.next);
        self.next += 1;
        self.links += 1;
        let root_side = format!("qf{}v{}", self.tag, self.links);
        let host_side = format!("qf{}h{}", self.tag, self.links);
        ip(&[
            "link", "add", &root_side, "type", "veth", "peer", "name", &host_side,
        ]);
        ip(&["link", "set", &host_side, "netns", netns]);
        ip(&["-n", netns, "link", "set", &host_side, "name", device]);
        let cidr = format!("{address}/24");
        ip(&["-n", netns, "addr", "add", &cidr, "dev", device]);
        ip(&["-n", netns, "link", "set", device, "up"]);
        ip(&["link", "set", &root_side, "master", &self.bridge]);
        ip(&["link", "set", &root_side, "up"]);
        (address, root_side)
    }

    /// A new host `name` with one interface; returns its address.
    pub fn add_host(&mut self, name: &str) -> Ipv4Addr {
        let netns = format!("{PREFIX}{}-{}-{name}", std::process::id(), self.tag);
        ip(&["netns", "add", &netns]);
        // Registered before anything else can fail, so Drop removes it.
        self.hosts.push((
            name.to_owned(),
            Host {
                netns: netns.clone(),
                address: Ipv4Addr::UNSPECIFIED,
                link: String::new(),
                extra: Vec::new(),
            },
        ));
        // Loopback too: each process's probe listener binds 127.0.0.1.
        ip(&["-n", &netns, "link", "set", "lo", "up"]);
        let (address, link) = self.cable(&netns, "eth0");
        let host = self.host_mut(name);
        host.address = address;
        host.link = link;
        address
    }

    /// A second network interface on host `name` (a separate network card, with its own
    /// cable); returns its address.
    ///
    /// Both cards are on the one bridge and subnet, so the host answers ARP for an
    /// address only on the card that has it (`arp_ignore = 1`, `arp_announce = 2`).
    /// Linux's default answers for any of the host's addresses on any card: with this
    /// card's cable pulled, the first card took its traffic as soon as the clients'
    /// ARP entries went stale, and the storage outage of `fleet::partitions` ended
    /// unseen after a few seconds.
    pub fn add_interface(&mut self, name: &str) -> Ipv4Addr {
        let netns = self.host(name).netns.clone();
        for (setting, value) in [("arp_ignore", "1"), ("arp_announce", "2")] {
            for scope in ["all", "default"] {
                let path = format!("/proc/sys/net/ipv4/conf/{scope}/{setting}");
                let status = Command::new("ip")
                    .args(["netns", "exec", &netns, "sh", "-c"])
                    .arg(format!("echo {value} > {path}"))
                    .status()
                    .expect("run ip netns exec");
                assert!(status.success(), "could not set {path} in {netns}");
            }
        }
        let device = format!("eth{}", self.host(name).extra.len() + 1);
        let (address, link) = self.cable(&netns, &device);
        self.host_mut(name).extra.push((address, link));
        address
    }

    pub fn host(&self, name: &str) -> &Host {
        self.hosts
            .iter()
            .find(|(host, _)| host == name)
            .map(|(_, host)| host)
            .unwrap_or_else(|| panic!("no host {name}"))
    }

    fn host_mut(&mut self, name: &str) -> &mut Host {
        self.hosts
            .iter_mut()
            .find(|(host, _)| host == name)
            .map(|(_, host)| host)
            .unwrap_or_else(|| panic!("no host {name}"))
    }

    /// The root side of the cable of `address` (of any host).
    fn link_of(&self, address: Ipv4Addr) -> &str {
        self.hosts
            .iter()
            .flat_map(|(_, host)| {
                std::iter::once((host.address, host.link.as_str()))
                    .chain(host.extra.iter().map(|(a, l)| (*a, l.as_str())))
            })
            .find(|(a, _)| *a == address)
            .map(|(_, link)| link)
            .unwrap_or_else(|| panic!("no interface has {address}"))
    }

    /// Pulls the cable of the interface with `address`: nothing reaches it or leaves it
    /// (no reset either: open connections stall, as across a real network).
    pub fn link_down(&self, address: Ipv4Addr) {
        ip(&["link", "set", self.link_of(address), "down"]);
    }

    /// Plugs the cable back in.
    pub fn link_up(&self, address: Ipv4Addr) {
        ip(&["link", "set", self.link_of(address), "up"]);
    }
}

/// A /24 in 10.213.0.0/16 that no interface of this machine has an address in.
fn free_subnet() -> [u8; 3] {
    let taken = ip_quietly(&["-o", "-4", "addr", "show"]);
    let start = uuid::Uuid::new_v4().as_bytes()[0];
    (0..=255u8)
        .map(|offset| start.wrapping_add(offset))
        .find(|third| !taken.contains(&format!("10.213.{third}.")))
        .map(|third| [10, 213, third])
        .expect("a free 10.213.x.0/24 for the test network")
}

impl Drop for Network {
    fn drop(&mut self) {
        for (_, host) in &self.hosts {
            remove_netns(&host.netns);
        }
        // The veths die with their namespace; this catches one whose peer never moved.
        for link in 1..=self.links {
            ip_quietly(&["link", "del", &format!("qf{}v{link}", self.tag)]);
        }
        ip_quietly(&["link", "del", &self.bridge]);
    }
}

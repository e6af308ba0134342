//! Established connections to move between congestion controls: bare namespaces, idle
//! loopback pairs in them, and the census of their connecting ends (`cctl migrate`'s tests
//! and the fault matrix).

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;

use cctl_loader::migrate::{self, SocketFilter};
use cctl_netem::netns::spawn_in_netns;
use socket2::{Domain, Socket, Type};

/// A bare namespace with lo up, deleted on drop.
pub struct Netns(pub String);

impl Netns {
    /// Creates namespace `name` (`ip netns add`) and brings its lo up.
    pub fn new(name: &str) -> Netns {
        let st = Command::new("ip").args(["netns", "add", name]).status();
        assert!(st.unwrap().success(), "ip netns add {name}");
        let st = Command::new("ip")
            .args(["-n", name, "link", "set", "lo", "up"])
            .status();
        assert!(st.unwrap().success());
        Netns(name.into())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.0])
            .status();
    }
}

/// `n` idle loopback connections in namespace `ns`, client side running `cc`; kept open
/// while the returned streams live.
pub fn idle_pairs(ns: &str, n: usize, cc: &str, port: u16) -> Vec<TcpStream> {
    let cc = cc.to_string();
    spawn_in_netns(ns, move || idle_pairs_here(n, &cc, port))
        .unwrap()
        .join()
        .unwrap()
        .unwrap()
}

/// [`idle_pairs`] in the calling thread's namespace.
pub fn idle_pairs_here(n: usize, cc: &str, port: u16) -> Vec<TcpStream> {
    // The accepted ends inherit the listener's reno, so that only the `n` connecting
    // ends run `cc` whatever the namespace's default is (cubic on Debian, bbr here).
    let l = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    l.set_reuse_address(true).unwrap();
    l.set_tcp_congestion(b"reno").unwrap();
    l.bind(&SocketAddr::from(([127, 0, 0, 1], port)).into())
        .unwrap();
    l.listen(128).unwrap();
    let l = TcpListener::from(l);
    let mut v = Vec::new();
    for _ in 0..n {
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        s.set_tcp_congestion(cc.as_bytes()).unwrap();
        s.connect(&SocketAddr::from(([127, 0, 0, 1], port)).into())
            .unwrap();
        v.push(TcpStream::from(s));
        v.push(l.accept().unwrap().0);
    }
    v
}

/// The connecting ends (remote port `port`) of [`idle_pairs`], in every namespace, by
/// cookie: (namespace, cc, struct_ops map id).
pub fn clients(port: u16) -> BTreeMap<u64, (String, String, Option<u32>)> {
    migrate::sockets_all_namespaces(&SocketFilter {
        port: Some(port),
        ..Default::default()
    })
    .expect("census of all namespaces")
    .into_iter()
    .filter(|s| s.state == "ESTABLISHED" && s.dport == port)
    .map(|s| (s.cookie, (s.netns, s.cc, s.ca_map_id)))
    .collect()
}

//! Every algorithm in every profile passes the 6.12 guest kernel's verifier and registers
//! (a conformance run loads only the profile it compares); cctl loads, and its collector
//! attaches, with RLIMIT_MEMLOCK at 0 (issue 29's resource faults).

use std::process::Command;

use cctl_loader::catalogue::ALGORITHMS;
use cctl_loader::registry;
use cctl_tests::cctl_bin;
use cctl_tests::guest::Part;

/// The parts, in the order they run.
pub const PARTS: &[Part] = &[
    Part {
        name: "load-every-profile",
        guest_s: 16,
        run: every_algorithm_and_profile_loads,
    },
    Part {
        name: "memlock-zero",
        guest_s: 5,
        run: loads_and_traces_with_memlock_zero,
    },
];

fn every_algorithm_and_profile_loads() {
    for a in ALGORITHMS {
        let mut profiles: Vec<Option<&str>> = vec![None];
        profiles.extend(a.profiles.iter().map(|p| Some(p.name)));
        for p in profiles {
            let rec = registry::load(
                a.key,
                &registry::LoadOptions {
                    profile: p.map(str::to_string),
                    owned: true,
                    ..Default::default()
                },
            )
            .unwrap_or_else(|e| panic!("{} {p:?} does not load on this kernel: {e:#}", a.key));
            println!("loaded {} on {}", rec.name, rec.kernel);
            registry::LoadGuard::new(rec.name).unload().expect("unload");
        }
    }
}

/// `cctl load` (programs, struct_ops and .data maps) and `cctl trace` (the collector's
/// ring buffer and tracing programs) under `prlimit --memlock=0:0`. Since Linux 5.11 BPF
/// memory is charged to the memory cgroup, not to RLIMIT_MEMLOCK, and libbpf raises the
/// limit only on kernels without that: on 6.12 a limit of 0 must change nothing.
fn loads_and_traces_with_memlock_zero() {
    let name = "ml_htcp";
    let bin = cctl_bin();
    let limited = |args: &[&str]| {
        let o = Command::new("prlimit")
            .args(["--memlock=0:0", "--"])
            .arg(&bin)
            .args(args)
            .output()
            .expect("prlimit runs");
        let text = format!(
            "cctl {} under RLIMIT_MEMLOCK 0: exit {:?}\n{}{}",
            args.join(" "),
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        println!("{text}");
        (o.status.success(), text)
    };
    let (ok, text) = limited(&["load", "htcp", "--name", name]);
    assert!(ok, "{text}");
    let _guard = registry::LoadGuard::new(name.to_string());
    let (ok, text) = limited(&["trace", "--duration-s", "1", "--json"]);
    assert!(ok, "{text}");
    let (ok, text) = limited(&["unload", name]);
    assert!(ok, "{text}");
}

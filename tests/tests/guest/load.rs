//! Every algorithm in every profile passes the 6.12 guest kernel's verifier and registers
//! (a conformance run loads only the profile it compares).

use cctl_loader::catalogue::ALGORITHMS;
use cctl_loader::registry;
use cctl_tests::guest::Part;

/// The parts, in the order they run.
pub const PARTS: &[Part] = &[Part {
    name: "load-every-profile",
    guest_s: 15,
    run: every_algorithm_and_profile_loads,
}];

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

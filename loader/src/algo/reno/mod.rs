//! Reno / NewReno (spec §2): bpf/algo/reno.bpf.c, no tunables, no variables beyond the
//! shared measurement layer.

crate::algo::declare_algorithm! {
    key: reno,
    id: 1,
    summary: "standard TCP (NewReno): +1 segment per RTT, halve on loss; the baseline",
    paper: "[P1] eq. 1-2; every paper's baseline",
    spec: "§2",
    native: Some("reno"),
    clocked: false,
    params: [],
    profiles: [],
}

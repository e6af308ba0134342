//! A BPF-side check of the live-tunable protocol (bpf/probe/livecheck.bpf.c): while attached,
//! every segment an established socket receives makes a BPF program read a loaded
//! version's two live tunables as the ports do (the slot index once, both values from
//! that slot) and count the reads whose pair was never written together. The storm test
//! (`tests/tests/storm.rs`) writes pairs with a fixed sum from several threads; a torn
//! read is one with another sum.

use std::mem::MaybeUninit;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use std::os::fd::{AsFd as _, AsRawFd as _};

use libbpf_rs::MapCore as _;

use crate::error::{Error, Result};
use crate::skel::livecheck::{LivecheckSkel, LivecheckSkelBuilder};

/// Reads counted so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveCheckCounts {
    /// Reads of the pair (one per received segment of every established socket).
    pub reads: u64,
    /// Reads whose two values do not add up to the pair sum: half of one write.
    pub torn: u64,
}

/// The attached checker; detached when dropped.
pub struct LiveCheck {
    skel: LivecheckSkel<'static>,
}

impl LiveCheck {
    /// Attaches the checker to version `version` of `name`, watching live tunables `a`
    /// and `b` (members of its `cctl_live` slots), whose every write keeps
    /// `a + b == pair_sum`.
    ///
    /// Errors: [`Error::NoVersion`] (no such version, or without those live tunables),
    /// [`Error::Bpf`] (verifier or attach).
    pub fn attach(name: &str, version: u32, a: &str, b: &str, pair_sum: u32) -> Result<Self> {
        let rec = crate::registry::list_loaded()?
            .into_iter()
            .find(|r| r.name == name)
            .ok_or_else(|| crate::registry::not_loaded(name))?;
        let v = rec
            .versions
            .iter()
            .find(|v| v.version == version)
            .ok_or_else(|| Error::NoVersion {
                name: name.into(),
                detail: format!("has no version {version}"),
            })?;
        let live = crate::live::open_live(name, v)?.ok_or_else(|| Error::NoVersion {
            name: name.into(),
            detail: format!("version {version} has no live tunables"),
        })?;
        let member = |k: &str| {
            live.layout
                .params
                .get(k)
                .cloned()
                .ok_or_else(|| Error::NoVersion {
                    name: name.into(),
                    detail: format!("version {version} has no live {k}"),
                })
        };
        let (ga, gb) = (member(a)?, member(b)?);
        // The object lives as long as the process: the skeleton borrows it.
        let storage = Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = LivecheckSkelBuilder::default()
            .open(storage)
            .map_err(|e| Error::bpf("opening the live-tunable checker", e))?;
        {
            let ro = open
                .maps
                .rodata_data
                .as_deref_mut()
                .expect("livecheck .rodata is memory-mapped");
            ro.slot_index_off = live.layout.slot_index as u32;
            ro.slot0_off = live.layout.base as u32;
            ro.slot_size = live.layout.slot_size as u32;
            ro.a_off = ga.offset as u32;
            ro.b_off = gb.offset as u32;
            ro.pair_sum = pair_sum;
        }
        open.maps
            .data
            .set_inner_map_fd(live.map.as_fd())
            .map_err(|e| Error::bpf(format!("taking the .data map of {name} as template"), e))?;
        let mut skel = open
            .load()
            .map_err(|e| Error::bpf("loading the live-tunable checker (verifier)", e))?;
        let fd = live.map.as_fd().as_raw_fd() as u32;
        skel.maps
            .data
            .update(
                &0u32.to_ne_bytes(),
                &fd.to_ne_bytes(),
                libbpf_rs::MapFlags::ANY,
            )
            .map_err(|e| Error::bpf(format!("sharing the .data map of {name}"), e))?;
        skel.attach()
            .map_err(|e| Error::bpf("attaching the checker to tp_btf/tcp_probe", e))?;
        Ok(LiveCheck { skel })
    }

    /// The counts so far.
    pub fn counts(&self) -> LiveCheckCounts {
        let bss = self
            .skel
            .maps
            .bss_data
            .as_deref()
            .expect("livecheck .bss is memory-mapped");
        // SAFETY: aligned u64s of the memory-mapped .bss, alive as long as the skeleton.
        unsafe {
            LiveCheckCounts {
                reads: std::ptr::read_volatile(&bss.reads),
                torn: std::ptr::read_volatile(&bss.torn),
            }
        }
    }
}

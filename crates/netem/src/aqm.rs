//! The bottleneck's queue discipline (issue 19): drop-tail `pfifo` (the default), CoDel with
//! flow queueing (`fq_codel`, RFC 8290), PIE (RFC 8033), RED (Floyd & Jacobson 1993) and
//! CAKE, each with ECN marking on or off; the `tc` lines that build it, the host sysctls an
//! ECN scenario needs, and the qdisc's own counters (drops, ECN marks, its delay estimate)
//! from `tc -s -j qdisc show`.
//!
//! `pfifo`, `fq_codel`, `pie` and `red` replace the drop-tail child of the tbf rate limiter
//! (`tbf rate R (1:) -> <qdisc> (10:)`), with the scenario's buffer as their packet limit.
//! CAKE has its own shaper, so it replaces tbf at the root: `cake bandwidth R besteffort raw`,
//! where `raw` (no overhead compensation) makes it count the same bytes as tbf (the L2 frame,
//! 1514 bytes for a full-sized packet), so R means the same rate.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Packet size RED's byte thresholds are computed from (tc's `avpkt`), in bytes: a full
/// 1500-byte IP packet.
pub const RED_AVPKT_BYTES: u32 = 1500;

/// L2 frame of a full-sized packet, in bytes (what tbf, RED's `limit` and CAKE count).
/// Size of one full frame on the bottleneck: 1500-byte IP MTU plus the 14-byte Ethernet
/// header, in bytes (what `tc` counts per packet once offloads are off).
pub const FRAME_BYTES: u32 = 1514;

/// The queue disciplines a scenario may put at the bottleneck, as written in `qdisc`.
pub const QDISCS: &[&str] = &["pfifo", "fq_codel", "pie", "red", "cake"];

/// CoDel's target sojourn time (Linux fq_codel default, RFC 8289 §4.4), in ms.
pub const CODEL_TARGET_MS_DEFAULT: f64 = 5.0;
/// CoDel's interval (Linux fq_codel default, RFC 8289 §4.5), in ms.
pub const CODEL_INTERVAL_MS_DEFAULT: f64 = 100.0;
/// PIE's target queueing delay (Linux sch_pie default, RFC 8033 §4.1), in ms.
pub const PIE_TARGET_MS_DEFAULT: f64 = 15.0;
/// RED's maximum marking/drop probability (tc-red(8) default), in [0, 1].
pub const RED_PROBABILITY_DEFAULT: f64 = 0.02;

/// Numeric AQM parameters of a scenario and the qdisc each belongs to.
pub const AQM_PARAMS: &[(&str, Qdisc)] = &[
    ("codel_target_ms", Qdisc::FqCodel),
    ("codel_interval_ms", Qdisc::FqCodel),
    ("ce_threshold_ms", Qdisc::FqCodel),
    ("pie_target_ms", Qdisc::Pie),
    ("red_min_pkts", Qdisc::Red),
    ("red_max_pkts", Qdisc::Red),
    ("red_probability", Qdisc::Red),
];

/// A bottleneck queue discipline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Qdisc {
    /// Drop-tail FIFO of `buffer` packets under tbf (today's bottleneck).
    #[default]
    Pfifo,
    /// fq_codel under tbf: per-flow queues, each managed by CoDel (RFC 8290).
    FqCodel,
    /// PIE under tbf (RFC 8033).
    Pie,
    /// RED under tbf (Floyd & Jacobson 1993), thresholds in packets.
    Red,
    /// CAKE at the root, shaping to the bottleneck rate itself.
    Cake,
}

impl Qdisc {
    /// The name in scenario files and in tc.
    pub fn as_str(self) -> &'static str {
        match self {
            Qdisc::Pfifo => "pfifo",
            Qdisc::FqCodel => "fq_codel",
            Qdisc::Pie => "pie",
            Qdisc::Red => "red",
            Qdisc::Cake => "cake",
        }
    }

    /// The qdisc named `name` (one of [`QDISCS`]).
    pub fn parse(name: &str) -> Option<Qdisc> {
        Some(match name {
            "pfifo" => Qdisc::Pfifo,
            "fq_codel" => Qdisc::FqCodel,
            "pie" => Qdisc::Pie,
            "red" => Qdisc::Red,
            "cake" => Qdisc::Cake,
            _ => return None,
        })
    }

    /// Whether it can mark ECN-capable packets instead of dropping them.
    pub fn can_mark(self) -> bool {
        self != Qdisc::Pfifo
    }

    /// The message for an unknown name: what is allowed.
    pub fn unknown(name: &str) -> String {
        format!("unknown qdisc \"{name}\"; allowed: {}", QDISCS.join(", "))
    }
}

impl fmt::Display for Qdisc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The bottleneck discipline of one run point, with every parameter resolved (defaults filled
/// in); only the selected qdisc's parameters are set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Aqm {
    /// The queue discipline.
    pub qdisc: Qdisc,
    /// ECN: the qdisc marks ECN-capable packets (fq_codel `ecn`, pie/red `ecn`; CAKE always
    /// does) and every host namespace runs with `net.ipv4.tcp_ecn=1`.
    pub ecn: bool,
    /// fq_codel: CoDel's target, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codel_target_ms: Option<f64>,
    /// fq_codel: CoDel's interval, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codel_interval_ms: Option<f64>,
    /// fq_codel: sojourn time above which ECT packets are CE-marked at once (the DCTCP-style
    /// step marking of fq_codel's `ce_threshold`), in ms; `None`: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ce_threshold_ms: Option<f64>,
    /// pie: target queueing delay, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pie_target_ms: Option<f64>,
    /// red: lower threshold of the average queue, in packets of [`RED_AVPKT_BYTES`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub red_min_pkts: Option<f64>,
    /// red: upper threshold of the average queue, in packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub red_max_pkts: Option<f64>,
    /// red: marking/drop probability at the upper threshold, in (0, 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub red_probability: Option<f64>,
}

/// A milliseconds value as tc writes it, in µs (`5ms` → `5000us`).
fn us(ms: f64) -> String {
    format!("{}us", (ms * 1000.0).round() as u64)
}

impl Aqm {
    /// The tc lines (for `tc -batch`) that build the bottleneck on `dev`: a tbf of `rate_mbit`
    /// with a `burst_bytes` bucket over the qdisc with a limit of `queue_pkts` packets, or a
    /// CAKE shaper at the root.
    pub fn tc_lines(
        &self,
        dev: &str,
        rate_mbit: f64,
        burst_bytes: u32,
        queue_pkts: u32,
    ) -> Vec<String> {
        let kbit = (rate_mbit * 1000.0).round() as u64;
        if self.qdisc == Qdisc::Cake {
            // CAKE has no packet limit: its memlimit counts bytes of buffer memory.
            return vec![format!(
                "qdisc add dev {dev} root handle 1: cake bandwidth {kbit}kbit besteffort raw memlimit {}",
                u64::from(queue_pkts) * u64::from(FRAME_BYTES)
            )];
        }
        // `latency` only sizes tbf's default bfifo child, which the child below replaces.
        vec![
            format!("qdisc add dev {dev} root handle 1: tbf rate {kbit}kbit burst {burst_bytes} latency 1s"),
            format!("qdisc add dev {dev} parent 1:1 handle 10: {}", self.child(queue_pkts)),
        ]
    }

    /// The child qdisc's tc arguments (`pfifo limit 100`, `fq_codel limit 100 ...`).
    pub fn child(&self, queue_pkts: u32) -> String {
        let ecn = if self.ecn { " ecn" } else { "" };
        match self.qdisc {
            Qdisc::Pfifo | Qdisc::Cake => format!("pfifo limit {queue_pkts}"),
            Qdisc::FqCodel => {
                let mut s = format!(
                    "fq_codel limit {queue_pkts} target {} interval {}",
                    us(self.codel_target_ms.unwrap_or(CODEL_TARGET_MS_DEFAULT)),
                    us(self.codel_interval_ms.unwrap_or(CODEL_INTERVAL_MS_DEFAULT)),
                );
                if let Some(ce) = self.ce_threshold_ms {
                    s += &format!(" ce_threshold {}", us(ce));
                }
                // fq_codel marks by default: say which.
                s += if self.ecn { " ecn" } else { " noecn" };
                s
            }
            Qdisc::Pie => format!(
                "pie limit {queue_pkts} target {}{ecn}",
                us(self.pie_target_ms.unwrap_or(PIE_TARGET_MS_DEFAULT))
            ),
            Qdisc::Red => {
                let (min, max) = self.red_thresholds_bytes(queue_pkts);
                // tc needs burst ≥ min/avpkt (its EWMA weight from `burst`); the smallest
                // allowed gives the fastest-moving average, closest to the instantaneous queue.
                let burst = min / RED_AVPKT_BYTES + 1;
                format!(
                    "red limit {} min {min} max {max} avpkt {RED_AVPKT_BYTES} burst {burst} probability {}{ecn}",
                    u64::from(queue_pkts) * u64::from(FRAME_BYTES),
                    self.red_probability.unwrap_or(RED_PROBABILITY_DEFAULT)
                )
            }
        }
    }

    /// RED's thresholds in bytes. min = max is a step at K: the kernel marks (or drops)
    /// every packet once the average queue reaches max (checked in the 6.12 guest: tc
    /// accepts it and RED marks with no early drops).
    fn red_thresholds_bytes(&self, queue_pkts: u32) -> (u32, u32) {
        let (min, max) = red_defaults(queue_pkts, self.red_min_pkts, self.red_max_pkts);
        let min = (min * f64::from(RED_AVPKT_BYTES)).round() as u32;
        let max = ((max * f64::from(RED_AVPKT_BYTES)).round() as u32).max(min);
        (min, max)
    }

    /// Host sysctls of this bottleneck's hosts: `net.ipv4.tcp_ecn=1` with ECN, `=0` without.
    pub fn ecn_sysctl(&self) -> &'static str {
        if self.ecn {
            "net.ipv4.tcp_ecn=1"
        } else {
            "net.ipv4.tcp_ecn=0"
        }
    }

    /// Whether it marks ECN (ECN on and a qdisc that can mark): what dctcp needs.
    pub fn marks(&self) -> bool {
        self.ecn && self.qdisc.can_mark()
    }
}

/// RED's thresholds in packets: as given, else tc-red(8)'s defaults (max = limit / 4,
/// min = max / 3), at least one packet each.
pub fn red_defaults(queue_pkts: u32, min: Option<f64>, max: Option<f64>) -> (f64, f64) {
    let max = max.unwrap_or_else(|| (f64::from(queue_pkts) / 4.0).max(1.0));
    let min = min.unwrap_or_else(|| (max / 3.0).max(1.0));
    (min, max.max(min))
}

/// The qdisc's own counters at one moment, from `tc -s -j qdisc show`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct AqmStats {
    /// Packets the bottleneck dropped (queue full or AQM), in packets: the root's `drops`
    /// (tbf's include its child's).
    pub drops: u64,
    /// Packets the AQM CE-marked instead of dropping, in packets (fq_codel `ecn_mark` +
    /// `ce_mark`, pie `ecn_mark`, red `marked`, cake Σ tins `ecn_mark`).
    pub ecn_marks: u64,
    /// The qdisc's own estimate of the queueing delay, in µs: pie `delay`, cake the largest
    /// tin `avg_delay_us`; `None` for qdiscs that report none (pfifo, fq_codel, red).
    pub delay_us: Option<f64>,
    /// cake: the largest tin `peak_delay_us`, in µs.
    pub peak_delay_us: Option<f64>,
}

/// One sample of [`AqmStats`] in a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct AqmPoint {
    /// Sample time, in seconds since the run's t0.
    pub t_s: f64,
    /// The counters (cumulative) and the delay estimate.
    #[serde(flatten)]
    pub stats: AqmStats,
}

fn u(v: &serde_json::Value, key: &str) -> u64 {
    v.get(key).and_then(|x| x.as_u64()).unwrap_or(0)
}

fn fnum(v: &serde_json::Value, key: &str) -> Option<f64> {
    v.get(key).and_then(|x| x.as_f64())
}

impl AqmStats {
    /// Parses the JSON of `tc -s -j qdisc show dev X` for a bottleneck with `qdisc`; `None`
    /// when the output has no root qdisc.
    pub fn from_tc_json(json: &str, qdisc: Qdisc) -> Result<Option<AqmStats>, String> {
        let (list, root) = crate::tc::qdiscs_and_root(json)?;
        let Some(root) = root.map(|i| &list[i]) else {
            return Ok(None);
        };
        let mut s = AqmStats {
            drops: u(root, "drops"),
            ..AqmStats::default()
        };
        let Some(q) = list
            .iter()
            .find(|q| q.get("kind").and_then(|k| k.as_str()) == Some(qdisc.as_str()))
        else {
            return Ok(Some(s));
        };
        // Some iproute2 versions nest the qdisc-specific statistics under "xstats".
        let x = q.get("xstats").unwrap_or(q);
        match qdisc {
            Qdisc::Pfifo => {}
            Qdisc::FqCodel => s.ecn_marks = u(x, "ecn_mark") + u(x, "ce_mark"),
            Qdisc::Pie => {
                s.ecn_marks = u(x, "ecn_mark");
                s.delay_us = fnum(x, "delay");
            }
            Qdisc::Red => s.ecn_marks = u(x, "marked"),
            Qdisc::Cake => {
                let tins = x.get("tins").and_then(|t| t.as_array());
                for tin in tins.into_iter().flatten() {
                    s.ecn_marks += u(tin, "ecn_mark");
                    let max = |a: Option<f64>, b: Option<f64>| match (a, b) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        (a, b) => a.or(b),
                    };
                    s.delay_us = max(s.delay_us, fnum(tin, "avg_delay_us"));
                    s.peak_delay_us = max(s.peak_delay_us, fnum(tin, "peak_delay_us"));
                }
            }
        }
        Ok(Some(s))
    }
}

/// What a run's bottleneck was built with: recorded in `metadata.json` and `run.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BottleneckSetup {
    /// The discipline and its parameters.
    pub aqm: Aqm,
    /// The tc lines as applied (device names of slot 0 in the metadata).
    pub tc: Vec<String>,
    /// The ECN sysctl set in every sender and receiver namespace.
    pub ecn_sysctl: String,
    /// `net.ipv4.tcp_congestion_control` of the receiver namespace when it is not the
    /// kernel's default (dctcp when a dctcp flow is present: its receivers echo every CE mark).
    pub receiver_cc: Option<String>,
}

/// Where the kernel lists the congestion controls a non-initial network namespace may make
/// its default.
const ALLOWED_CC: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// Makes `cc` allowed as a namespace's default congestion control: outside the initial
/// namespace the kernel refuses (EPERM) a `net.ipv4.tcp_congestion_control` that is not in
/// the initial namespace's `tcp_allowed_congestion_control`, so `cc` is appended there
/// (a kernel-wide setting, left in place: it only widens what namespaces may choose).
/// Returns whether the list was changed.
pub fn allow_namespace_default(cc: &str) -> std::io::Result<bool> {
    let now = std::fs::read_to_string(ALLOWED_CC)?;
    if now.split_whitespace().any(|c| c == cc) {
        return Ok(false);
    }
    std::fs::write(ALLOWED_CC, format!("{} {cc}", now.trim()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tc_lines_put_the_aqm_under_tbf_and_cake_at_the_root() {
        let pfifo = Aqm::default().tc_lines("b0", 20.0, 3028, 100);
        assert_eq!(
            pfifo,
            [
                "qdisc add dev b0 root handle 1: tbf rate 20000kbit burst 3028 latency 1s",
                "qdisc add dev b0 parent 1:1 handle 10: pfifo limit 100"
            ]
        );
        let fq = Aqm {
            qdisc: Qdisc::FqCodel,
            ce_threshold_ms: Some(2.0),
            ..Aqm::default()
        };
        assert_eq!(
            fq.child(100),
            "fq_codel limit 100 target 5000us interval 100000us ce_threshold 2000us noecn"
        );
        let pie = Aqm {
            qdisc: Qdisc::Pie,
            ecn: true,
            pie_target_ms: Some(10.0),
            ..Aqm::default()
        };
        assert_eq!(pie.child(50), "pie limit 50 target 10000us ecn");
        let red = Aqm {
            qdisc: Qdisc::Red,
            ecn: true,
            red_min_pkts: Some(20.0),
            red_max_pkts: Some(20.0),
            red_probability: Some(1.0),
            ..Aqm::default()
        };
        assert_eq!(
            red.child(100),
            "red limit 151400 min 30000 max 30000 avpkt 1500 burst 21 probability 1 ecn"
        );
        let cake = Aqm {
            qdisc: Qdisc::Cake,
            ..Aqm::default()
        };
        assert_eq!(
            cake.tc_lines("b0", 20.0, 3028, 100),
            ["qdisc add dev b0 root handle 1: cake bandwidth 20000kbit besteffort raw memlimit 151400"]
        );
        assert_eq!(red_defaults(100, None, None), (25.0 / 3.0, 25.0));
        assert_eq!(red_defaults(2, None, None), (1.0, 1.0));
    }

    // From `tc -s -j qdisc show` of iproute2 6.1 in the 6.12 guest.
    const FQ: &str = r#"[{"kind":"tbf","handle":"1:","root":true,"refcnt":3,"options":{"rate":2500000,"burst":3027,"lat":1000000},"bytes":3794527,"packets":2527,"drops":3,"overlimits":4083,"requeues":0,"backlog":0,"qlen":0},{"kind":"fq_codel","handle":"10:","parent":"1:1","options":{"limit":100,"flows":1024,"quantum":1514,"target":4999,"ce_threshold":1999,"interval":99999,"memory_limit":33554432,"ecn":true,"drop_batch":64},"bytes":3794527,"packets":2527,"drops":3,"overlimits":0,"requeues":0,"backlog":0,"qlen":0,"maxpacket":3028,"drop_overlimit":0,"new_flow_count":32,"ecn_mark":1,"ce_mark":424,"new_flows_len":0,"old_flows_len":0}]"#;
    const PIE: &str = r#"[{"kind":"tbf","handle":"1:","root":true,"refcnt":3,"options":{"rate":2500000,"burst":3027,"lat":1000000},"bytes":7985610,"packets":5314,"drops":0,"overlimits":9317,"requeues":0,"backlog":0,"qlen":0},{"kind":"pie","handle":"10:","parent":"1:1","options":{"limit":100,"target":15000,"tupdate":16000,"alpha":2,"beta":20,"ecn":true},"bytes":4191083,"packets":2787,"drops":0,"overlimits":0,"requeues":0,"backlog":0,"qlen":0,"prob":0,"delay":1234,"pkts_in":2787,"overlimit":0,"dropped":0,"maxq":98,"ecn_mark":2}]"#;
    const RED: &str = r#"[{"kind":"tbf","handle":"1:","root":true,"refcnt":3,"options":{"rate":2500000,"burst":3027,"lat":1000000},"bytes":11263637,"packets":7496,"drops":0,"overlimits":13250,"requeues":0,"backlog":0,"qlen":0},{"kind":"red","handle":"10:","parent":"1:1","options":{"limit":151400,"min":30000,"max":30000,"ecn":true,"harddrop":false,"adaptive":false,"nodrop":false},"bytes":3278027,"packets":2182,"drops":0,"overlimits":202,"requeues":0,"backlog":0,"qlen":0,"marked":202,"early":0,"pdrop":0,"other":0}]"#;
    const CAKE: &str = r#"[{"kind":"cake","handle":"8001:","root":true,"refcnt":3,"options":{"bandwidth":2500000,"diffserv":"besteffort","raw":true,"overhead":0,"memlimit":151400},"bytes":4767918,"packets":3168,"drops":5,"overlimits":3645,"requeues":0,"backlog":0,"qlen":0,"tins":[{"threshold_rate":2500000,"sent_bytes":4767918,"backlog_bytes":0,"target_us":5000,"interval_us":100000,"peak_delay_us":13911,"avg_delay_us":7183,"base_delay_us":265,"sent_packets":3168,"drops":5,"ecn_mark":14,"ack_drops":0}]}]"#;

    #[test]
    fn the_guests_tc_json_gives_drops_marks_and_delays() {
        let s = |j, q| AqmStats::from_tc_json(j, q).unwrap().unwrap();
        assert_eq!(
            s(FQ, Qdisc::FqCodel),
            AqmStats {
                drops: 3,
                ecn_marks: 425,
                delay_us: None,
                peak_delay_us: None
            }
        );
        assert_eq!(
            s(PIE, Qdisc::Pie),
            AqmStats {
                drops: 0,
                ecn_marks: 2,
                delay_us: Some(1234.0),
                peak_delay_us: None
            }
        );
        assert_eq!(s(RED, Qdisc::Red).ecn_marks, 202);
        assert_eq!(
            s(CAKE, Qdisc::Cake),
            AqmStats {
                drops: 5,
                ecn_marks: 14,
                delay_us: Some(7183.0),
                peak_delay_us: Some(13911.0)
            }
        );
        assert_eq!(AqmStats::from_tc_json("[]", Qdisc::Pie).unwrap(), None);
        assert!(AqmStats::from_tc_json("qdisc", Qdisc::Pie).is_err());
    }
}

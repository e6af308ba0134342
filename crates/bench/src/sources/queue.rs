//! A run's bottleneck queue: the qdisc's backlog, drops and bytes sent, and the AQM's own
//! statistics, sampled every `--queue-interval-ms` from t0 by a thread of its own
//! (`queue`, `aqm` of `run.json`; `queue.csv`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use cctl_metrics::QueuePoint;
use cctl_netem::aqm::AqmPoint;
use cctl_netem::testbed::QdiscSampler;
use cctl_report::record::RunRecord;

use super::{End, Running, Source, Start};

/// The source of a run's bottleneck samples.
pub struct Queue;

/// What the sampler thread has gathered so far.
#[derive(Default)]
struct Samples {
    queue: Vec<QueuePoint>,
    aqm: Vec<AqmPoint>,
}

/// The sampler thread of one run.
struct Sampling {
    samples: Arc<Mutex<Samples>>,
    done: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Source for Queue {
    fn start(&self, run: &Start) -> Result<Option<Box<dyn Running>>> {
        let samples: Arc<Mutex<Samples>> = Arc::default();
        let done = Arc::new(AtomicBool::new(false));
        let (ns, dev) = run.bed.sampled_queue();
        let every = run.req.queue_interval();
        let qdisc = run.point.aqm.qdisc;
        let t0 = run.t0().at;
        let mut tc = QdiscSampler::start(&ns, &dev).context("starting the queue sampler")?;
        let thread = {
            let (samples, done) = (samples.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    if let Ok((q, a)) = tc.sample_with_aqm(qdisc) {
                        let t_s = t0.elapsed().as_secs_f64();
                        let mut s = samples.lock().expect("queue lock");
                        if let Some(stats) = a {
                            s.aqm.push(AqmPoint { t_s, stats });
                        }
                        s.queue.push(QueuePoint {
                            t_s,
                            backlog_pkts: q.backlog_packets,
                            backlog_bytes: q.backlog_bytes,
                            drops: q.drops,
                            sent_pkts: q.sent_packets,
                            sent_bytes: q.sent_bytes,
                        });
                    }
                    std::thread::sleep(every);
                }
            })
        };
        Ok(Some(Box::new(Sampling {
            samples,
            done,
            thread,
        })))
    }
}

impl Running for Sampling {
    fn finish(self: Box<Self>, end: &End, record: &mut RunRecord) -> Result<()> {
        self.done.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        let Samples { queue, aqm } = std::mem::take(&mut *self.samples.lock().expect("queue lock"));
        let mut w = csv::Writer::from_path(end.dir.join("queue.csv"))?;
        for q in &queue {
            w.serialize(q)?;
        }
        w.flush()?;
        record.queue = queue;
        record.aqm = aqm;
        Ok(())
    }
}

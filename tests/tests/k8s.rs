//! The Kubernetes manifests (deploy/k8s: the sweep's Jobs, the exporter's DaemonSet) pass the
//! offline validation of deploy/k8s/validate.sh: strict decoding into the k8s.io/api types and
//! the checks each workload needs. No cluster; needs Go (and the Go module proxy once).

use std::path::Path;
use std::process::Command;

#[test]
fn every_kubernetes_manifest_passes_the_offline_validation() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = Command::new("bash")
        .arg(root.join("deploy/k8s/validate.sh"))
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "validate.sh failed:\n{stdout}\n{stderr}"
    );
    for file in ["bench-job.yaml", "daemonset.yaml"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.contains(file) && l.contains("Job(s)")),
            "{file} not validated:\n{stdout}"
        );
    }
    assert_eq!(
        stdout.matches("\nOK").count() + stdout.starts_with("OK") as usize,
        2,
        "{stdout}"
    );
}

#[test]
fn a_daemonset_without_host_pid_or_with_a_wrong_scrape_port_is_refused() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let good = std::fs::read_to_string(root.join("deploy/k8s/daemonset.yaml")).unwrap();
    let bad = good.replace("hostPID: true", "hostPID: false").replace(
        "prometheus.io/port: \"9977\"",
        "prometheus.io/port: \"9100\"",
    );
    assert_ne!(bad, good);
    let path = std::env::temp_dir().join(format!("cctl-bad-daemonset-{}.yaml", std::process::id()));
    std::fs::write(&path, bad).unwrap();
    let out = Command::new("bash")
        .arg(root.join("deploy/k8s/validate.sh"))
        .arg(&path)
        .output()
        .expect("bash runs");
    let _ = std::fs::remove_file(&path);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("hostPID is not true"), "{stderr}");
    assert!(
        stderr.contains("prometheus.io/port is \"9100\""),
        "{stderr}"
    );
}

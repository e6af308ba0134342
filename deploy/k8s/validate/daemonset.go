// Checks of deploy/k8s/daemonset.yaml: `cctl exporter` on every node.
package main

import (
	"net"
	"regexp"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The capabilities `cctl exporter` needs when the container is not privileged: the
// collector's BPF programs (BPF, PERFMON), the census's setns into every namespace
// (SYS_ADMIN) and reading other processes' /proc/<pid>/ns/net (SYS_PTRACE), NET_ADMIN for
// the loader's privilege check (loader/src/kernel.rs).
var exporterCaps = []corev1.Capability{"BPF", "PERFMON", "NET_ADMIN", "SYS_ADMIN", "SYS_PTRACE"}

var listenRe = regexp.MustCompile(`--listen[ =]"?(\S+?)"?(\s|$)`)

// checkExporter: one DaemonSet running `cctl exporter`, privileged on the host's network
// and PID namespaces, with bpffs, /run/cctl and /etc/cctl mounted and the metrics port
// annotated for scraping and equal to the port it listens on.
func checkExporter(m *manifest, p *problems) {
	if len(m.daemonSets) != 1 {
		p.add("manifest", "want exactly one DaemonSet, found %d", len(m.daemonSets))
	}
	declared := map[string]bool{"": true, "default": true}
	for _, ns := range m.namespaces {
		declared[ns.Name] = true
	}
	for _, ds := range m.daemonSets {
		obj := "DaemonSet " + ds.Name
		if !declared[ds.Namespace] {
			p.add(obj, "namespace %q is not declared in this file", ds.Namespace)
		}
		checkDaemonSet(obj, ds, p)
	}
}

func checkDaemonSet(obj string, ds *appsv1.DaemonSet, p *problems) {
	t := &ds.Spec.Template
	ps := &t.Spec
	if ds.Spec.Selector == nil {
		p.add(obj, "no selector")
	} else if sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector); err != nil || sel.Empty() {
		p.add(obj, "selector is empty or invalid: %v", err)
	} else if !sel.Matches(labels.Set(t.Labels)) {
		p.add(obj, "selector %v does not match the pod template's labels %v", sel, t.Labels)
	}
	if !ps.HostNetwork {
		p.add(obj, "hostNetwork is not true (the metrics port and the census start on the node's network)")
	}
	if !ps.HostPID {
		p.add(obj, "hostPID is not true (the census finds pods' network namespaces through the node's /proc)")
	}
	if ps.HostNetwork && ps.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		p.add(obj, "dnsPolicy is %q; with hostNetwork use ClusterFirstWithHostNet", ps.DNSPolicy)
	}
	if len(ps.Containers) != 1 {
		p.add(obj, "want one container, found %d", len(ps.Containers))
		return
	}
	c := ps.Containers[0]
	cobj := obj + " container " + c.Name
	if c.Image == "" {
		p.add(cobj, "no image")
	}
	script := jobScriptOf(c)
	if !regexp.MustCompile(`(^|/|\s)cctl exporter(\s|$)`).MatchString(script) {
		p.add(cobj, "the command does not run `cctl exporter`")
	}
	listenPort := 9977 // cctl exporter's default, 127.0.0.1 only
	if mm := listenRe.FindStringSubmatch(script); mm == nil {
		p.add(cobj, "no --listen: the default 127.0.0.1:9977 cannot be scraped from another host")
	} else if host, port, err := net.SplitHostPort(mm[1]); err != nil {
		p.add(cobj, "--listen %q is not ADDR:PORT: %v", mm[1], err)
	} else {
		listenPort, _ = strconv.Atoi(port)
		if ip := net.ParseIP(host); ip == nil || ip.IsLoopback() {
			p.add(cobj, "--listen %s: a loopback or non-IP address cannot be scraped from another host", mm[1])
		}
	}
	sc := c.SecurityContext
	if sc == nil || sc.Privileged == nil || !*sc.Privileged {
		var have []corev1.Capability
		if sc != nil && sc.Capabilities != nil {
			have = sc.Capabilities.Add
		}
		for _, want := range exporterCaps {
			if !slices.Contains(have, want) && !slices.Contains(have, "CAP_"+want) {
				p.add(cobj, "neither privileged nor securityContext.capabilities.add %s", want)
			}
		}
	}
	var metricsPort *corev1.ContainerPort
	for i := range c.Ports {
		if int(c.Ports[i].ContainerPort) == listenPort {
			metricsPort = &c.Ports[i]
		}
	}
	if metricsPort == nil {
		p.add(cobj, "no containerPort %d (the --listen port)", listenPort)
	} else if metricsPort.HostPort != 0 && metricsPort.HostPort != metricsPort.ContainerPort {
		p.add(cobj, "hostPort %d differs from containerPort %d (with hostNetwork they must agree)", metricsPort.HostPort, metricsPort.ContainerPort)
	}
	ann := t.Annotations
	if ann["prometheus.io/scrape"] != "true" {
		p.add(obj, "pod annotation prometheus.io/scrape is %q, want \"true\"", ann["prometheus.io/scrape"])
	}
	if port, err := strconv.Atoi(ann["prometheus.io/port"]); err != nil || port != listenPort {
		p.add(obj, "pod annotation prometheus.io/port is %q, want %q (the --listen port)", ann["prometheus.io/port"], strconv.Itoa(listenPort))
	}
	if path, ok := ann["prometheus.io/path"]; ok && path != "/metrics" {
		p.add(obj, "pod annotation prometheus.io/path is %q; the exporter serves /metrics", path)
	}
	checkMount(cobj, ps, c, "/sys/fs/bpf", "/sys/fs/bpf", false, p)
	checkMount(cobj, ps, c, "/run/cctl", "/run/cctl", false, p)
	checkMount(cobj, ps, c, "/etc/cctl", "/etc/cctl", true, p)
	checkMount(cobj, ps, c, "/sys/kernel/btf", "/sys/kernel/btf", true, p)
	for _, probe := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if probe == nil || probe.HTTPGet == nil {
			continue
		}
		if pp := probe.HTTPGet.Port; pp.IntValue() != listenPort && (metricsPort == nil || pp.String() != metricsPort.Name) {
			p.add(cobj, "a probe checks port %s, not the metrics port %d", pp.String(), listenPort)
		}
	}
}

// jobScriptOf is a container's command and args, joined by spaces.
func jobScriptOf(c corev1.Container) string {
	s := ""
	for i, w := range append(slices.Clone(c.Command), c.Args...) {
		if i > 0 {
			s += " "
		}
		s += w
	}
	return s
}

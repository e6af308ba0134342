#!/usr/bin/env bash
# netem-available.sh - exits 0 if the running kernel can attach sch_netem (probed in a
# throw-away network namespace), 1 if not; used to install the VM only where needed.
set -u
modprobe -q sch_netem 2>/dev/null || true
ns="cctl-netem-check-$$"
ip netns add "$ns" 2>/dev/null || exit 1
trap 'ip netns delete "$ns" 2>/dev/null' EXIT
ip -n "$ns" link add p0 type dummy 2>/dev/null &&
	tc -n "$ns" qdisc add dev p0 root netem delay 1ms 2>/dev/null

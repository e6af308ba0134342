#!/bin/bash
# check.sh - the guest side of the systemd boot test (tests/boot/run.sh). Runs once per
# boot as cctl-boot-check.service, after multi-user.target, in a Debian guest whose PID 1
# is systemd. It drives four boots through a phase kept on the guest's disk and writes
# every result to the second serial port (/dev/ttyS1), which the host reads:
#
#   1. install: `dpkg -i` the package, write /etc/cctl/cctl.toml (tests/boot/cctl.toml),
#      enable both units, reboot.
#   2. applied: cctl-apply.service ran before network-pre.target and left the kernel as
#      the file says; cctl-exporter.service answers. Reboot.
#   3. again: the same state is back after the reboot. Break the file (an unknown
#      algorithm), reboot.
#   4. broken: cctl-apply.service failed with the error in the journal, the machine still
#      booted (multi-user.target reached, cctl-apply the only failed unit, the exporter answers), nothing
#      was half-applied. Power off.
#
# Lines: "RESULT <phase> PASS|FAIL <what>", "JOURNAL <phase> <journal line>",
# "PHASE <n> <name>" and "DONE" at the end.
set -u

OUT=/dev/ttyS1
STATE=/var/lib/cctl-boot/phase
CONF=/etc/cctl/cctl.toml
EXPECTED_DEFAULT=bpf_htcp
EXPECTED_NAME=bpf_htcp
POLICY_PORT=5201
EXPORTER=http://127.0.0.1:9977/metrics

phase=$(cat "$STATE" 2>/dev/null || echo 1)

say() {
	echo "$*" >"$OUT"
}

result() { # result PASS|FAIL what
	say "RESULT $phase $1 $2"
}

check() { # check "what" command...
	local what=$1
	shift
	if "$@" >/tmp/check.out 2>&1; then
		result PASS "$what"
	else
		result FAIL "$what: $(tr '\n' ' ' </tmp/check.out | cut -c1-400)"
	fi
}

next() { # next PHASE then reboot|poweroff
	echo "$1" >"$STATE"
	sync
	systemctl "$2"
}

journal() {
	journalctl -b --no-pager -o short-monotonic -u cctl-apply.service -u cctl-exporter.service |
		while IFS= read -r l; do say "JOURNAL $phase $l"; done
	# Where network-pre.target was reached, for the order.
	journalctl -b --no-pager -o short-monotonic | grep -E "Reached target .*[Nn]etwork \(Pre\)|network-pre" |
		while IFS= read -r l; do say "JOURNAL $phase $l"; done
}

# The unit's monotonic timestamps: apply's exit no later than network-pre.target's start.
applied_before_network_pre() {
	local done pre
	done=$(systemctl show -P ExecMainExitTimestampMonotonic cctl-apply.service)
	pre=$(systemctl show -P ActiveEnterTimestampMonotonic network-pre.target)
	echo "cctl-apply exited at ${done} us, network-pre.target reached at ${pre} us"
	say "ORDER $phase cctl-apply exited at ${done} us, network-pre.target reached at ${pre} us (monotonic)"
	[ "${done:-0}" -gt 0 ] && [ "${pre:-0}" -gt 0 ] && [ "$done" -le "$pre" ]
}

exporter_answers() {
	local i
	for i in $(seq 1 120); do
		if curl -sf "$EXPORTER" -o /tmp/metrics; then
			grep -q '^cctl_' /tmp/metrics && return 0
		fi
		sleep 1
	done
	echo "no answer from $EXPORTER in 120 s"
	systemctl status --no-pager cctl-exporter.service
	return 1
}

state_matches_file() {
	cctl list --json | grep -q "\"$EXPECTED_NAME\"" || {
		echo "cctl list has no $EXPECTED_NAME"
		return 1
	}
	[ "$(sysctl -n net.ipv4.tcp_congestion_control)" = "$EXPECTED_DEFAULT" ] || {
		echo "default is $(sysctl -n net.ipv4.tcp_congestion_control)"
		return 1
	}
	cctl policy list --json | grep -q "$POLICY_PORT" || {
		echo "no policy rule for port $POLICY_PORT"
		return 1
	}
	# Nothing left to do: the kernel is exactly what the file says.
	cctl apply --dry-run "$CONF" | tee /tmp/dry
	grep -qi "nothing to do" /tmp/dry
}

show_state() {
	say "STATE $phase default=$(sysctl -n net.ipv4.tcp_congestion_control) available=$(cat /proc/sys/net/ipv4/tcp_available_congestion_control)"
	cctl policy list | while IFS= read -r l; do say "STATE $phase policy: $l"; done
	say "STATE $phase failed units: $(systemctl list-units --failed --plain --no-legend | cut -d' ' -f1 | tr '\n' ' ')"
}

case "$phase" in
1)
	say "PHASE 1 install"
	check "systemd is PID 1" test "$(cat /proc/1/comm)" = systemd
	check "no cctl before the package" test ! -e /usr/bin/cctl
	check "dpkg -i the package" dpkg -i /root/cctl.deb
	check "cctl --version" cctl --version
	say "STATE 1 $(cctl --version)"
	check "write $CONF" install -m 0644 /root/cctl.toml "$CONF"
	check "enable the units" systemctl enable cctl-apply.service cctl-exporter.service
	next 2 reboot
	;;
2 | 3)
	say "PHASE $phase $([ "$phase" = 2 ] && echo applied || echo again)"
	check "cctl-apply.service active" systemctl is-active cctl-apply.service
	check "applied before network-pre.target" applied_before_network_pre
	check "the kernel matches $CONF" state_matches_file
	check "cctl-exporter.service answers" exporter_answers
	show_state
	journal
	if [ "$phase" = 2 ]; then
		next 3 reboot
	else
		# An algorithm cctl does not have: `cctl apply` refuses the whole file.
		printf 'default = "bpf_nosuch"\n\n[[algorithm]]\nalgo = "nosuch"\n' >"$CONF"
		next 4 reboot
	fi
	;;
4)
	say "PHASE 4 broken"
	check "cctl-apply.service failed" systemctl is-failed cctl-apply.service
	check "its exit status is 2 (bad input)" test "$(systemctl show -P ExecMainStatus cctl-apply.service)" = 2
	check "the error is in the journal" sh -c "journalctl -b -u cctl-apply.service --no-pager | grep -i nosuch"
	check "the machine booted: multi-user.target reached" systemctl is-active multi-user.target
	check "cctl-apply.service is the only failed unit" sh -c \
		'test "$(systemctl list-units --failed --plain --no-legend | cut -d" " -f1)" = cctl-apply.service'
	check "nothing half-applied: no BPF name registered" sh -c '! grep -q bpf_ /proc/sys/net/ipv4/tcp_available_congestion_control'
	check "cctl-exporter.service still answers" exporter_answers
	show_state
	journal
	say "DONE"
	next done poweroff
	;;
*)
	say "DONE (phase $phase: nothing to do)"
	systemctl poweroff
	;;
esac

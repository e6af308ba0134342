#!/usr/bin/env bash
# slurm-local.sh - a throwaway one-node Slurm cluster on this machine, for trying out and
# testing deploy/slurm/ (the `cctl bench` job arrays) without a real cluster.
#
#   scripts/slurm-local.sh up       install slurm-wlm + munge if missing (apt-get), start
#                                   munged, slurmctld and slurmd, wait for the node to be idle
#   scripts/slurm-local.sh status   sinfo and squeue of the local cluster
#   scripts/slurm-local.sh env      prints `export SLURM_CONF=...` (eval it to use sbatch etc.)
#   scripts/slurm-local.sh down     cancel all jobs, stop the daemons (by their pid files),
#                                   remove the state directory
#
# Everything lives in one state directory (CCTL_SLURM_DIR, default /tmp/cctl-slurm): the
# generated slurm.conf, a munge key and socket of its own, spool, pid and log files. Nothing in
# /etc is read or written: the daemons get the config with -f, the clients with SLURM_CONF, and
# slurm.conf names the munge socket (AuthInfo=socket=...), so a system munged or Slurm, if
# there is one, is left alone. No systemd, cgroups, dbus or accounting database: the daemons
# are started directly, ProctrackType=proctrack/linuxproc, TaskPlugin=task/none. Jobs run as
# the submitting user (SlurmUser=root; run this as root).
#
# After `up`, point the Slurm clients at the cluster:
#   export SLURM_CONF=/tmp/cctl-slurm/etc/slurm.conf     (or: eval "$(scripts/slurm-local.sh env)")
#
# Environment: CCTL_SLURM_DIR (state directory), CCTL_SLURMCTLD_PORT (6817),
# CCTL_SLURMD_PORT (6818), CCTL_SLURM_UP_TIMEOUT (seconds `up` waits for the node, 60).
# `up` and `down` are idempotent: `up` on a running cluster says so, `up` over a half-started
# one cleans it up first, `down` without a cluster does nothing.
set -euo pipefail

STATE=${CCTL_SLURM_DIR:-/tmp/cctl-slurm}
CTLD_PORT=${CCTL_SLURMCTLD_PORT:-6817}
SLURMD_PORT=${CCTL_SLURMD_PORT:-6818}
UP_TIMEOUT=${CCTL_SLURM_UP_TIMEOUT:-60}

CONF=$STATE/etc/slurm.conf
MUNGE_DIR=$STATE/munge
MUNGE_SOCKET=$MUNGE_DIR/munge.socket.2
NODE=$(hostname -s)
PKGS=(slurm-wlm munge)

log() { echo "slurm-local: $*" >&2; }
die() {
	log "$*"
	exit 1
}

# name pidfile comm: the daemons this script starts, and the process name each must have
# (a pid file left behind must not make us signal an unrelated process that reused the pid).
DAEMONS=(
	"slurmd $STATE/run/slurmd.pid slurmd"
	"slurmctld $STATE/run/slurmctld.pid slurmctld"
	"munged $MUNGE_DIR/munged.pid munged"
)

install_packages() {
	local missing=() p
	for p in "${PKGS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	((${#missing[@]})) || return 0
	[ "$(id -u)" -eq 0 ] || die "missing packages: ${missing[*]}; run as root"
	log "installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# Pid recorded in $1 if that process is alive and named $2, else nothing.
live_pid() {
	local pidfile=$1 comm=$2 pid
	[ -s "$pidfile" ] || return 1
	pid=$(tr -dc '0-9' <"$pidfile")
	[ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 1
	[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ] || return 1
	echo "$pid"
}

# Sends TERM to pid $1, waits up to $2 s, then KILL.
stop_pid() {
	local pid=$1 wait=${2:-10} i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < wait * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	sleep 0.2
}

# The process and its descendants, deepest first.
tree() {
	local pid=$1 c
	for c in $(ps -e -o pid=,ppid= | awk -v p="$pid" '$2 == p { print $1 }'); do
		tree "$c"
	done
	echo "$pid"
}

# Job steps of this cluster still alive after slurmd is gone: slurmstepd processes that
# inherited SLURM_CONF=$CONF from our slurmd, with everything below them.
leftover_steps() {
	local d pid
	for d in /proc/[0-9]*; do
		pid=${d#/proc/}
		[ "$(cat "$d/comm" 2>/dev/null)" = slurmstepd ] || continue
		tr '\0' '\n' <"$d/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$CONF" || continue
		tree "$pid"
	done
}

slurm_env() { export SLURM_CONF=$CONF; }

stop_all() {
	local name pidfile comm pid entry steps p
	slurm_env
	# Cancel jobs first so that their steps end cleanly (a cancelled cctl ends its QEMU).
	if live_pid "$STATE/run/slurmctld.pid" slurmctld >/dev/null; then
		local jobs
		jobs=$(timeout 10 squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ' || true)
		if [ -n "${jobs// /}" ]; then
			log "cancelling jobs $jobs"
			# shellcheck disable=SC2086 # job ids, one word each
			timeout 10 scancel --quiet $jobs 2>/dev/null || true
			# Steps get SIGTERM, then SIGKILL after KillWait (30 s).
			for _ in $(seq 1 45); do
				[ -z "$(timeout 10 squeue -h -o %i 2>/dev/null)" ] && break
				sleep 1
			done
		fi
	fi
	for entry in "${DAEMONS[@]}"; do
		read -r name pidfile comm <<<"$entry"
		if pid=$(live_pid "$pidfile" "$comm"); then
			log "stopping $name (pid $pid)"
			stop_pid "$pid" 15
		fi
		rm -f "$pidfile"
	done
	steps=$(leftover_steps)
	if [ -n "$steps" ]; then
		log "killing leftover job steps: $(echo "$steps" | tr '\n' ' ')"
		for p in $steps; do kill -TERM "$p" 2>/dev/null || true; done
		sleep 2
		for p in $steps; do kill -KILL "$p" 2>/dev/null || true; done
	fi
}

all_running() {
	local entry name pidfile comm
	for entry in "${DAEMONS[@]}"; do
		read -r name pidfile comm <<<"$entry"
		live_pid "$pidfile" "$comm" >/dev/null || return 1
	done
}

node_state() { timeout 10 sinfo -h -N -n "$NODE" -o %T 2>/dev/null | head -1; }

tails() {
	local f
	for f in "$MUNGE_DIR/munged.log" "$STATE/log/slurmctld.log" "$STATE/log/slurmd.log"; do
		[ -f "$f" ] || continue
		echo "---- tail $f" >&2
		tail -n 25 "$f" >&2
	done
}

write_conf() {
	local hw
	# The node as slurmd sees it: CPUs, sockets, cores, threads, RealMemory.
	hw=$(slurmd -C | head -1 | sed -e 's/^NodeName=[^ ]* *//')
	[ -n "$hw" ] || die "slurmd -C printed nothing"
	cat >"$CONF" <<EOF
# Generated by scripts/slurm-local.sh: a one-node cluster on localhost. Removed by \`down\`.
ClusterName=cctl-local
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
StateSaveLocation=$STATE/spool/ctld
SlurmdSpoolDir=$STATE/spool/d
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$STATE/etc/plugstack.conf
# No systemd, cgroups or dbus: processes tracked through /proc, no task binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# No accounting database (so no sacct); finished jobs stay visible to scontrol for an hour
# and their end states go to a text file.
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE/log/jobcomp.txt
MinJobAge=3600
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
InactiveLimit=0
KillWait=30
SlurmctldTimeout=120
SlurmdTimeout=300
NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$NODE $hw State=UNKNOWN
PartitionName=local Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
	: >"$STATE/etc/plugstack.conf"
}

up() {
	install_packages
	slurm_env
	if all_running; then
		case "$(node_state)" in
		idle | allocated | mixed | completing)
			log "already up ($NODE: $(node_state)); export SLURM_CONF=$CONF"
			return 0
			;;
		esac
	fi
	if [ -d "$STATE" ]; then
		log "cleaning up a previous cluster in $STATE"
		stop_all
		rm -rf "$STATE"
	fi
	mkdir -p "$STATE"/{etc,run,log,spool/ctld,spool/d} "$MUNGE_DIR"
	chmod 0755 "$STATE" "$MUNGE_DIR"

	# munge: a key of its own, its own socket, pid, log and seed files.
	if [ ! -s "$MUNGE_DIR/munge.key" ]; then
		mungekey --create --keyfile="$MUNGE_DIR/munge.key" 2>/dev/null ||
			dd if=/dev/urandom of="$MUNGE_DIR/munge.key" bs=1024 count=1 status=none
	fi
	chmod 0400 "$MUNGE_DIR/munge.key"
	write_conf

	log "starting munged"
	# --force: start even over a stale socket lock left by a killed munged.
	munged --force --socket="$MUNGE_SOCKET" --key-file="$MUNGE_DIR/munge.key" \
		--pid-file="$MUNGE_DIR/munged.pid" --log-file="$MUNGE_DIR/munged.log" \
		--seed-file="$MUNGE_DIR/munged.seed" || fail_up "munged did not start"
	munge -n -S "$MUNGE_SOCKET" | unmunge -S "$MUNGE_SOCKET" >/dev/null ||
		fail_up "munge credential round trip failed"

	log "starting slurmctld"
	slurmctld -f "$CONF" || fail_up "slurmctld did not start"
	log "starting slurmd"
	slurmd -f "$CONF" -N "$NODE" || fail_up "slurmd did not start"

	local t0 s="" entry name pidfile comm
	t0=$(date +%s)
	while :; do
		s=$(node_state || true)
		[ "$s" = idle ] && break
		# A daemon that could not start (port in use, bad config) exits after forking; give
		# them a few seconds to write their pid files.
		if (($(date +%s) - t0 >= 5)); then
			for entry in "${DAEMONS[@]}"; do
				read -r name pidfile comm <<<"$entry"
				live_pid "$pidfile" "$comm" >/dev/null || fail_up "$name is not running (see its log)"
			done
		fi
		if (($(date +%s) - t0 >= UP_TIMEOUT)); then
			fail_up "node $NODE not idle after ${UP_TIMEOUT}s (state: ${s:-no answer from slurmctld})"
		fi
		sleep 1
	done
	log "up: node $NODE idle, state in $STATE"
	log "use it with: export SLURM_CONF=$CONF"
}

# A failed `up`: the reason, the daemons' log tails, and nothing left running (the logs stay
# in $STATE until `down`).
fail_up() {
	log "up failed: $*"
	tails
	stop_all
	log "daemons stopped; logs kept in $STATE (scripts/slurm-local.sh down removes it)"
	exit 1
}

down() {
	if [ ! -d "$STATE" ]; then
		log "nothing to stop ($STATE does not exist)"
		return 0
	fi
	stop_all
	rm -rf "$STATE"
	log "down: daemons stopped, $STATE removed"
}

status() {
	slurm_env
	local entry name pidfile comm pid
	for entry in "${DAEMONS[@]}"; do
		read -r name pidfile comm <<<"$entry"
		if pid=$(live_pid "$pidfile" "$comm"); then
			echo "$name: running (pid $pid)"
		else
			echo "$name: not running"
		fi
	done
	all_running || return 1
	echo "SLURM_CONF=$CONF"
	sinfo
	squeue
}

case "${1:-}" in
up) up ;;
down) down ;;
status) status ;;
env) echo "export SLURM_CONF=$CONF" ;;
*)
	echo "usage: $0 up|down|status|env" >&2
	exit 2
	;;
esac

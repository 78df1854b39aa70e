#!/usr/bin/env bash
# A throw-away single-node SLURM cluster on this machine, for checking the
# workflow's `slurm` profile against a real scheduler (tests/workflow/test_slurm_profile.py).
#
#   local_slurm.sh start  [SCRATCH]   install SLURM if absent, start munged, slurmctld, slurmd
#   local_slurm.sh status [SCRATCH]   daemons and node state; exit 0 when the node takes jobs
#   local_slurm.sh stop   [SCRATCH]   cancel jobs, stop the daemons started here, delete SCRATCH
#
# SCRATCH (argument, else $LOCAL_SLURM_DIR, else ${TMPDIR:-/tmp}/local-slurm) holds
# everything this cluster writes: slurm.conf, state, spool, logs, pid files and the
# jobcomp record of every finished job (jobcomp.log). While it runs, /etc/slurm/slurm.conf
# (SLURM's built-in default path) is a symlink to SCRATCH/slurm.conf: the Snakemake
# jobstep drops every SLURM_* variable, SLURM_CONF included, before its inner `srun`,
# so the default path is the only one that reaches it. `stop` removes the link. A
# slurm.conf that this script did not link is never replaced (exit 5). `start` prints
# `export SLURM_CONF=...` as its last line for clients started elsewhere.
#
# Exit codes (tests/workflow/test_slurm_profile.py skips on 3, 4 and 5 and shows the message):
#   0 done; 2 usage; 3 SLURM absent and cannot be installed (no root, no apt-get,
#   apt-get failed); 4 installed but the cluster did not come up (not root, another
#   local cluster still running, or the daemons failed: their logs are quoted); 5 a SLURM
#   set up by someone else is here (a cluster answers sinfo, or /etc/slurm/slurm.conf
#   was not written by this script): it is left untouched and nothing is started.
#
# Environment: LOCAL_SLURM_DIR (scratch), LOCAL_SLURM_CTLD_PORT / LOCAL_SLURM_SLURMD_PORT
# (default 6817 / 6818), LOCAL_SLURM_WAIT (seconds to wait for the node, default 60).
set -uo pipefail

readonly E_USAGE=2 E_INSTALL=3 E_START=4 E_REAL_CLUSTER=5
readonly MARKER=.local_slurm # only folders holding this file are ever deleted by `stop`
readonly SYSTEM_CONF=/etc/slurm/slurm.conf

die() { # die CODE MESSAGE...
    local code=$1
    shift
    echo "local_slurm: $*" >&2
    exit "$code"
}

log() { echo "local_slurm: $*" >&2; }

scratch_dir() { # scratch_dir [SCRATCH] [create]: the absolute scratch path
    local dir=${1:-${LOCAL_SLURM_DIR:-${TMPDIR:-/tmp}/local-slurm}}
    [[ ${2:-} == create ]] && mkdir -p "$dir"
    [[ -d $dir ]] && (cd "$dir" && pwd)
}

pid_alive() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

have_slurm() { command -v slurmctld && command -v slurmd && command -v munged && command -v sbatch; } >/dev/null

install_slurm() {
    [[ $(id -u) -eq 0 ]] || die $E_INSTALL "SLURM is not installed and installing it needs root (apt-get install slurm-wlm munge)"
    command -v apt-get >/dev/null || die $E_INSTALL "SLURM is not installed and apt-get is unavailable on this machine"
    log "SLURM is not installed: apt-get install -y slurm-wlm munge"
    local apt_log
    apt_log=$(mktemp)
    if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y slurm-wlm munge; } >"$apt_log" 2>&1; then
        local tail_lines
        tail_lines=$(tail -n 5 "$apt_log")
        rm -f "$apt_log"
        die $E_INSTALL "apt-get could not install slurm-wlm munge: $tail_lines"
    fi
    rm -f "$apt_log"
    have_slurm || die $E_INSTALL "apt-get finished but slurmctld/slurmd/munged/sbatch are still missing"
}

# True when SYSTEM_CONF is a link made by `start`: its target folder holds MARKER, or the
# target is gone (a run that was killed before `stop`; a dangling link configures nothing).
system_conf_is_ours() {
    [[ -L $SYSTEM_CONF ]] || return 1
    local target
    target=$(readlink "$SYSTEM_CONF")
    [[ ! -e $target || -f $(dirname "$target")/$MARKER ]]
}

# Refuse to start next to a SLURM set up by someone else: a cluster answering `sinfo`
# with its own configuration, or a slurm.conf at the default path that is not our link.
check_no_foreign_slurm() {
    system_conf_is_ours && return 0
    if command -v sinfo >/dev/null && env -u SLURM_CONF timeout 15 sinfo -h >/dev/null 2>&1; then
        die $E_REAL_CLUSTER "a SLURM cluster configured on this machine already answers sinfo; left untouched, nothing started"
    fi
    if [[ -e $SYSTEM_CONF || -L $SYSTEM_CONF ]]; then
        die $E_REAL_CLUSTER "$SYSTEM_CONF exists and was not written by local_slurm.sh; left untouched, nothing started"
    fi
}

# One local cluster at a time: they would share the ports and the SYSTEM_CONF link.
check_no_other_local_cluster() {
    local dir=$1 target
    [[ -L $SYSTEM_CONF ]] || return 0
    target=$(readlink "$SYSTEM_CONF")
    if [[ $target != "$dir/slurm.conf" ]] && pid_alive "$(dirname "$target")/slurmctld.pid"; then
        die $E_START "another local cluster runs in $(dirname "$target"); stop it first"
    fi
}

link_system_conf() {
    mkdir -p "$(dirname "$SYSTEM_CONF")"
    ln -sfn "$1/slurm.conf" "$SYSTEM_CONF"
}

unlink_system_conf() {
    local dir=$1
    if [[ -L $SYSTEM_CONF && $(readlink "$SYSTEM_CONF") == "$dir/slurm.conf" ]]; then
        rm -f "$SYSTEM_CONF"
    fi
}

munge_works() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munged() {
    local dir=$1
    if munge_works; then
        return 0 # a munged already runs (the system's): share it, never stop it
    fi
    [[ -r /etc/munge/munge.key ]] || die $E_START "no /etc/munge/munge.key (the munge package creates it)"
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    chmod 0755 /run/munge
    runuser -u munge -- munged --pid-file=/run/munge/munged.pid ||
        die $E_START "munged did not start"
    cp /run/munge/munged.pid "$dir/munged.pid" # ours: `stop` ends it
    local _
    for _ in $(seq 50); do
        munge_works && return 0
        sleep 0.2
    done
    die $E_START "munged started but munge/unmunge fail"
}

write_conf() {
    local dir=$1 host cpus mem_mb
    host=$(hostname -s)
    cpus=$(nproc)
    # RealMemory a little under MemTotal, so that slurmd never finds less than configured.
    mem_mb=$(awk '/^MemTotal:/ {printf "%d", $2 / 1024 * 0.95}' /proc/meminfo)
    mkdir -p "$dir/state" "$dir/spool" "$dir/log"
    cat >"$dir/slurm.conf" <<EOF
# Written by tests/slurm/local_slurm.sh: a single-node cluster for tests; delete with 'stop'.
ClusterName=localtest
SlurmctldHost=$host
SlurmctldPort=${LOCAL_SLURM_CTLD_PORT:-6817}
SlurmdPort=${LOCAL_SLURM_SLURMD_PORT:-6818}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/jobcomp.log
# Without slurmdbd, squeue is the only status source: keep finished jobs visible for 10 min.
MinJobAge=600
ReturnToService=2
SchedulerType=sched/backfill
# A job without --mem would otherwise hold the whole node's memory.
DefMemPerCPU=1000
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

node_state() { sinfo -h -N -n "$(hostname -s)" -o %T 2>/dev/null | head -n 1; }

daemon_logs() { # the last lines of both daemon logs, for error messages
    local dir=$1 f
    for f in "$dir/log/slurmctld.log" "$dir/log/slurmd.log"; do
        [[ -f $f ]] && {
            echo "--- $f"
            tail -n 8 "$f"
        }
    done
}

cmd_start() {
    local dir
    dir=$(scratch_dir "${1:-}" create) || die $E_USAGE "cannot create scratch folder ${1:-}"
    export SLURM_CONF=$dir/slurm.conf
    if pid_alive "$dir/slurmctld.pid" && pid_alive "$dir/slurmd.pid"; then
        log "already running in $dir"
        echo "export SLURM_CONF=$SLURM_CONF"
        return 0
    fi
    check_no_foreign_slurm
    check_no_other_local_cluster "$dir"
    have_slurm || install_slurm
    [[ $(id -u) -eq 0 ]] || die $E_START "starting slurmctld/slurmd needs root"
    touch "$dir/$MARKER"
    write_conf "$dir"
    link_system_conf "$dir"
    start_munged "$dir"
    slurmctld -f "$SLURM_CONF" -i || die $E_START "slurmctld did not start: $(daemon_logs "$dir")"
    slurmd -f "$SLURM_CONF" || die $E_START "slurmd did not start: $(daemon_logs "$dir")"
    local waited=0 limit=${LOCAL_SLURM_WAIT:-60} state=""
    while ((waited < limit)); do
        state=$(node_state)
        case $state in
        idle | mixed | allocated) break ;;
        down* | drain*) scontrol update NodeName="$(hostname -s)" State=RESUME >/dev/null 2>&1 ;;
        esac
        sleep 1
        waited=$((waited + 1))
    done
    case $state in
    idle | mixed | allocated) ;;
    *) die $E_START "node not idle after ${limit}s (state '${state:-none}'): $(daemon_logs "$dir")" ;;
    esac
    log "node $(hostname -s) $state after ${waited}s; state in $dir"
    echo "export SLURM_CONF=$SLURM_CONF"
}

any_alive() { # any_alive PID...
    local pid
    for pid in "$@"; do
        kill -0 "$pid" 2>/dev/null && return 0
    done
    return 1
}

stop_pids() { # stop_pids PIDFILE...: TERM to all at once, wait up to 10 s, then KILL
    local pidfile pids=() pid _
    for pidfile in "$@"; do
        pid_alive "$pidfile" && pids+=("$(cat "$pidfile")")
    done
    ((${#pids[@]})) || return 0
    kill "${pids[@]}" 2>/dev/null
    for _ in $(seq 50); do
        any_alive "${pids[@]}" || break
        sleep 0.2
    done
    for pid in "${pids[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then
            log "pid $pid ignored TERM; killing"
            kill -9 "$pid" 2>/dev/null
        fi
    done
}

cmd_stop() {
    local dir
    dir=$(scratch_dir "${1:-}") || die $E_USAGE "no scratch folder ${1:-}"
    [[ -f $dir/$MARKER ]] || die $E_USAGE "$dir was not made by local_slurm.sh start; not touching it"
    export SLURM_CONF=$dir/slurm.conf
    if pid_alive "$dir/slurmctld.pid"; then
        # Jobs first, so that no job step outlives its slurmd.
        scancel --full --partition=debug >/dev/null 2>&1
        local _
        for _ in $(seq 30); do
            [[ -z $(squeue -h -t RUNNING,COMPLETING,PENDING -o %i 2>/dev/null) ]] && break
            sleep 0.5
        done
    fi
    stop_pids "$dir/slurmd.pid" "$dir/slurmctld.pid"
    stop_pids "$dir/munged.pid" # last: the SLURM daemons authenticate through it
    unlink_system_conf "$dir"
    rm -rf -- "$dir"
    log "stopped; removed $dir"
}

cmd_status() {
    local dir
    dir=$(scratch_dir "${1:-}") || die $E_USAGE "no scratch folder ${1:-}"
    export SLURM_CONF=$dir/slurm.conf
    local name
    for name in slurmctld slurmd; do
        if pid_alive "$dir/$name.pid"; then
            echo "$name running (pid $(cat "$dir/$name.pid"))"
        else
            echo "$name not running"
        fi
    done
    local state
    state=$(node_state)
    echo "node $(hostname -s): ${state:-unknown}"
    echo "export SLURM_CONF=$SLURM_CONF"
    [[ $state == idle || $state == mixed || $state == allocated ]]
}

case ${1:-} in
start) cmd_start "${2:-}" ;;
stop) cmd_stop "${2:-}" ;;
status) cmd_status "${2:-}" ;;
*) die $E_USAGE "usage: $0 start|stop|status [SCRATCH]" ;;
esac

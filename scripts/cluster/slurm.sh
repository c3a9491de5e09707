#!/bin/bash
# A one-node Slurm on this machine, for running scripts/slurm_evolve.sh through a real
# sbatch (make test-slurm; root needed).  Debian's Slurm (slurm-wlm) and munge: munged, slurmctld
# and slurmd run from a scratch folder with a configuration of their own, inside the
# network namespace synapto-slurm, so that they use no port of the machine and reach
# nothing but each other.  The node is `localhost` with $SLURM_TEST_CPUS CPUs (default 8,
# whatever the machine has: Slurm is told to believe its configuration).
#
#   scripts/cluster/slurm.sh install    # apt-get install Slurm and munge, if missing
#   scripts/cluster/slurm.sh up         # start the daemons (after ending leftovers)
#   scripts/cluster/slurm.sh exec CMD   # run CMD (sbatch, squeue, scontrol...) against it
#   scripts/cluster/slurm.sh down       # end every process of it, jobs included
#
# The scratch folder is $SLURM_TEST_DIR (default /tmp/synapto-slurm): configuration, logs,
# state.  `up` empties it; `down` leaves it, logs included.
set -euo pipefail

DIR=${SLURM_TEST_DIR:-/tmp/synapto-slurm}
CPUS=${SLURM_TEST_CPUS:-8}
NS=synapto-slurm

in_ns() { SLURM_CONF="$DIR/slurm.conf" nsenter --net="/run/netns/$NS" "$@"; }

install() {
    local missing="" cmd
    for cmd in sbatch srun scontrol slurmctld slurmd munged mungekey ip; do
        command -v "$cmd" >/dev/null || missing="$missing $cmd"
    done
    [ -z "$missing" ] && return 0
    command -v apt-get >/dev/null || { echo "slurm.sh: missing$missing and no apt-get to install them" >&2; exit 1; }
    # the daemons, the commands and munge: what the slurm-wlm bundle holds, without its plugins
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        slurmctld slurmd slurm-client munge iproute2
}

configure() {
    cat > "$DIR/slurm.conf" <<EOF
ClusterName=synapto-test
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/run/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
}

up() {
    down
    rm -rf "$DIR"
    mkdir -p "$DIR"/{state,spool,log,run,munge}
    chmod 755 "$DIR" "$DIR/run"  # munged wants its socket's folders open to all, its key's closed
    chmod 700 "$DIR/munge"
    configure
    mungekey --create --keyfile="$DIR/munge/munge.key"
    ip netns add "$NS"
    ip -n "$NS" link set lo up
    # Slurm resolves 127.0.0.1 with AI_ADDRCONFIG, which wants an IPv4 address besides lo's:
    # one end of a veth pair whose both ends stay in the namespace.
    ip -n "$NS" link add synapto-s0 type veth peer name synapto-s1
    ip -n "$NS" addr add 198.18.1.1/32 dev synapto-s0
    ip -n "$NS" link set synapto-s0 up
    ip -n "$NS" link set synapto-s1 up
    in_ns munged --socket="$DIR/run/munge.socket" --key-file="$DIR/munge/munge.key" \
        --pid-file="$DIR/run/munged.pid" --seed-file="$DIR/munge/seed" --log-file="$DIR/log/munged.log"
    in_ns slurmctld -f "$DIR/slurm.conf"
    in_ns slurmd -f "$DIR/slurm.conf" -N localhost
    local i
    for i in $(seq 60); do
        [ "$(in_ns sinfo -h -N -o %t 2>/dev/null)" = idle ] && return 0
        sleep 0.5
    done
    echo "slurm.sh: the node did not become idle within 30 s; logs in $DIR/log" >&2
    in_ns sinfo -N -l >&2 || true
    exit 1
}

down() {
    # Every process in the namespace was started by `up` or by its jobs: TERM, then KILL.
    [ -e "/run/netns/$NS" ] || return 0
    local i pids
    for i in $(seq 20); do
        pids=$(ip netns pids "$NS" | tr '\n' ' ')
        [ -z "${pids// /}" ] && break
        if [ "$i" -lt 10 ]; then kill -s TERM $pids 2>/dev/null || true; else kill -s KILL $pids 2>/dev/null || true; fi
        sleep 0.5
    done
    ip netns del "$NS"
}

case "${1:-}" in
    install) install ;;
    up) up ;;
    down) down ;;
    exec) shift; in_ns "$@" ;;
    *) echo "usage: $0 install | up | exec CMD... | down" >&2; exit 2 ;;
esac

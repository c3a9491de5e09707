#!/bin/bash
# Three "hosts" on this machine, for trying synapto across machines without machines
# (make test-multinode; root needed).  Each host is a Linux network namespace
# synapto-h0..2 with one interface eth0 (a veth pair to the bridge synapto-br0, which has
# no address) and the address 198.18.0.10..12/24 (198.18.0.0/15 is reserved for network
# tests); each runs its commands under a hostname of its own (synapto-h0..2, a UTS
# namespace).  Nothing leaves the bridge: the machine's own interfaces are not attached.
#
#   scripts/cluster/netns.sh install     # apt-get install iproute2, if `ip` is missing
#   scripts/cluster/netns.sh up          # create the hosts (after removing leftovers)
#   scripts/cluster/netns.sh exec 0 CMD  # run CMD on host 0
#   scripts/cluster/netns.sh down        # end every process on the hosts, remove them
#
# scripts/cluster/netns_ssh is the `ssh` that MPICH's mpiexec uses to start its proxies on
# the other hosts (-launcher ssh -launcher-exec scripts/cluster/netns_ssh).
set -euo pipefail

N_HOSTS=3
BRIDGE=synapto-br0
NET=198.18.0

ns() { echo "synapto-h$1"; }
addr() { echo "$NET.$((10 + $1))"; }

install() {
    command -v ip >/dev/null && return 0
    command -v apt-get >/dev/null || { echo "netns.sh: needs ip (iproute2)" >&2; exit 1; }
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends iproute2
}

up() {
    down
    ip link add "$BRIDGE" type bridge
    ip link set "$BRIDGE" up
    for i in $(seq 0 $((N_HOSTS - 1))); do
        ip netns add "$(ns "$i")"
        ip link add "synapto-v$i" type veth peer name eth0 netns "$(ns "$i")"
        ip link set "synapto-v$i" master "$BRIDGE" up
        ip -n "$(ns "$i")" addr add "$(addr "$i")/24" dev eth0
        ip -n "$(ns "$i")" link set eth0 up
        ip -n "$(ns "$i")" link set lo up
    done
}

down() {
    # Every process on a host was started there by these checks: TERM, then KILL.
    local i sig pids
    for sig in TERM KILL; do
        pids=""
        for i in $(seq 0 $((N_HOSTS - 1))); do
            if [ -e "/run/netns/$(ns "$i")" ]; then pids="$pids $(ip netns pids "$(ns "$i")")"; fi
        done
        pids=$(echo $pids)
        if [ -z "$pids" ]; then break; fi
        kill -s "$sig" $pids 2>/dev/null || true
        if [ "$sig" = TERM ]; then sleep 1; fi
    done
    for i in $(seq 0 $((N_HOSTS - 1))); do
        if [ -e "/run/netns/$(ns "$i")" ]; then ip netns del "$(ns "$i")"; fi
        ip link del "synapto-v$i" 2>/dev/null || true  # gone with its namespace, unless half made
    done
    ip link del "$BRIDGE" 2>/dev/null || true
}

run_on() {
    local i=$1; shift
    # a hostname of its own: MPI's processor names and synapto's error messages name the host
    exec ip netns exec "$(ns "$i")" unshare --uts /bin/sh -c 'hostname "$0" && exec "$@"' "$(ns "$i")" "$@"
}

case "${1:-}" in
    install) install ;;
    up) up ;;
    down) down ;;
    exec) shift; run_on "$@" ;;
    *) echo "usage: $0 install | up | down | exec HOST CMD..." >&2; exit 2 ;;
esac

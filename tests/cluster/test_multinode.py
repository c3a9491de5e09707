"""``synapto evolve`` across three hosts under MPICH's mpiexec, over TCP, writes the run file
of the one-process run (``make test-multinode``, root).

The hosts are network namespaces of this machine (scripts/cluster/netns.sh): own
interface, address and hostname each.  mpiexec runs on host 0 and starts its proxies on
hosts 1 and 2 through scripts/cluster/netns_ssh, as it would through ssh; rank 0 (the
coordinator) and one worker run on host 0, two workers on each of hosts 1 and 2.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest
from cluster import SCRIPTS, held_lock, require_root, run, signals_interrupt
from conftest import assert_same_run, run_cli

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

HOSTS = 3
RANKS_PER_HOST = 2
RANKS = HOSTS * RANKS_PER_HOST
MPIEXEC = Path(sys.executable).parent / "mpiexec"

# Each of the mpich wheel's two network modules, kept on TCP over the hosts' eth0.  The
# namespaces share one kernel, and UCX takes processes with the same kernel boot id for
# one machine: left alone it moves messages between the hosts through shared memory.
TRANSPORTS = {
    "ucx-tcp": {"UCX_TLS": "tcp", "UCX_NET_DEVICES": "eth0"},
    "ofi-tcp": {"MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": "eth0"},
}


@pytest.fixture(scope="module")
def hostfile(tmp_path_factory):
    require_root()
    path = tmp_path_factory.mktemp("hosts") / "hostfile"
    path.write_text("".join(f"198.18.0.{10 + i}:{RANKS_PER_HOST}\n" for i in range(HOSTS)))
    with held_lock("netns"), signals_interrupt():
        run([SCRIPTS / "netns.sh", "install"], timeout=600)
        run([SCRIPTS / "netns.sh", "up"], timeout=60)
        try:
            yield path
        finally:
            run([SCRIPTS / "netns.sh", "down"], timeout=60)
    left = [h for h in range(HOSTS) if os.path.exists(f"/run/netns/synapto-h{h}")]
    assert not left, f"hosts left behind: {left}"


def mpiexec(hostfile, transport, *cmd, timeout=240):
    """``mpiexec -n 6 cmd`` started on host 0; hydra ends the job itself a little before ``timeout``."""
    env = {**TRANSPORTS[transport], "MPIEXEC_TIMEOUT": timeout - 30}
    return run(
        [
            SCRIPTS / "netns.sh",
            "exec",
            "0",
            MPIEXEC,
            "-iface",
            "eth0",
            "-launcher",
            "ssh",
            "-launcher-exec",
            SCRIPTS / "netns_ssh",
            "-f",
            hostfile,
            "-n",
            RANKS,
            *cmd,
        ],
        timeout=timeout,
        env=env,
    )


def bytes_into_hosts() -> list[int]:
    """Bytes the bridge has delivered to each host so far."""
    return [int(Path(f"/sys/class/net/synapto-v{h}/statistics/tx_bytes").read_text()) for h in range(HOSTS)]


def expected_placement() -> dict[int, set[int]]:
    return {h: set(range(h * RANKS_PER_HOST, (h + 1) * RANKS_PER_HOST)) for h in range(HOSTS)}


class Placement:
    """The MPI ranks of ``synapto evolve`` seen running on each host while the block runs
    (processes read from /proc: the network namespace and $PMI_RANK of each)."""

    def __enter__(self):
        self.seen = {h: set() for h in range(HOSTS)}
        self._hosts = {os.stat(f"/run/netns/synapto-h{h}").st_ino: h for h in range(HOSTS)}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self.seen

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _watch(self):
        while not self._stop.wait(0.05):
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    host = self._hosts.get(os.stat(f"/proc/{pid}/ns/net").st_ino)
                    if host is None:
                        continue
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                except OSError:
                    continue
                ranks = [int(v[len(b"PMI_RANK=") :]) for v in environ if v.startswith(b"PMI_RANK=")]
                if b"synapto" in argv and b"evolve" in argv and ranks:
                    self.seen[host].add(ranks[0])


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_messages_between_hosts_cross_the_network(hostfile, transport):
    size = 4 << 20
    before = bytes_into_hosts()
    out = mpiexec(hostfile, transport, sys.executable, Path(__file__).with_name("mpi_probe.py"), size).stdout
    into = [b - a for a, b in zip(before, bytes_into_hosts())]
    assert json.loads(out.splitlines()[-1]) == [f"synapto-h{r // RANKS_PER_HOST}" for r in range(RANKS)]
    for h in range(1, HOSTS):  # rank 0 sent `size` bytes to each rank of hosts 1 and 2
        assert into[h] >= RANKS_PER_HOST * size, f"{into[h]} bytes reached host {h}: {into}"


CARTPOLE = [
    "--env",
    "CartPole-v1",
    "--agent",
    "pruned-mlp",
    "--hidden",
    "8",
    "8",
    "--population",
    "16",
    "--generations",
    "3",
    "--episodes",
    "2",
    "--seed",
    "7",
    "--test-episodes",
    "10",
]
RUNS = {
    "ga": (CARTPOLE, "ucx-tcp"),
    "ga-batch-off": ([*CARTPOLE, "--batch", "off"], "ofi-tcp"),
    "openai-es": (
        [
            "--env",
            "LunarLander-v3",
            "--agent",
            "pruned-mlp",
            "--hidden",
            "8",
            "--strategy",
            "openai-es",
            "--population",
            "16",
            "--generations",
            "3",
            "--episodes",
            "1",
            "--seed",
            "3",
            "--select-episodes",
            "4",
            "--test-episodes",
            "10",
        ],
        "ucx-tcp",
    ),
}


@pytest.mark.parametrize("name", RUNS)
def test_three_hosts_write_the_one_process_run_file(hostfile, tmp_path, name):
    args, transport = RUNS[name]
    one, three = tmp_path / "one.h5", tmp_path / "three.h5"
    proc = run_cli("evolve", *args, "--out", one, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with Placement() as seen:
        out = mpiexec(hostfile, transport, sys.executable, "-m", "synapto", "evolve", *args, "--out", three).stdout
    assert f"{RANKS - 1} workers" in out
    assert seen == expected_placement()
    assert_same_run(one, three)

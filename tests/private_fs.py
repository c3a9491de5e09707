"""Run steps on a small tmpfs of our own: real ENOSPC, real read-only file systems.

The steps run in a driver process inside a private mount namespace (``unshare --mount``;
as a normal user ``unshare --user --map-root-user --mount``): the tmpfs is mounted there
and vanishes with the namespace, so nothing is left mounted even if a test is killed.
Tests that cannot get a namespace are skipped.

Steps (JSON lists):

- ``["run", [args...], timeout]``: ``python -m synapto args`` (``["mpirun", n, [args...], timeout]``
  under ``mpiexec -n n``); records returncode (None: killed at the timeout), stdout, stderr;
- ``["leave_free", path, bytes]``: write a filler file ``path`` so that about ``bytes`` stay free;
- ``["rm", path]``, ``["copy", src, dst]``, ``["chmod", path, mode]``;
- ``["remount", "ro" | "rw"]``: remount the tmpfs;
- ``["ls"]``: records the files on the tmpfs with their sizes;
- ``["snapshot", name]``: records the files with a hash of their contents.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MPIEXEC, ROOT, _env

DRIVER = r"""
import hashlib, json, os, shutil, subprocess, sys
spec = json.loads(sys.argv[1])
mnt, py, mpiexec, env = spec["mnt"], spec["python"], spec["mpiexec"], spec["env"]
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % spec["size"], "none", mnt], check=True)

def files(digest):
    out = {}
    for root, _, names in os.walk(mnt):
        for n in names:
            p = os.path.join(root, n)
            rel = os.path.relpath(p, mnt)
            if digest:
                with open(p, "rb") as fh:
                    out[rel] = hashlib.sha256(fh.read()).hexdigest()
            else:
                out[rel] = os.path.getsize(p)
    return out

results = []
try:
    for step in spec["steps"]:
        kind = step[0]
        if kind in ("run", "mpirun"):
            if kind == "run":
                cmd, timeout = [py, "-m", "synapto", *step[1]], step[2]
            else:
                cmd, timeout = [mpiexec, "-n", str(step[1]), py, "-m", "synapto", *step[2]], step[3]
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                 cwd=spec["cwd"], start_new_session=True)
            try:
                out, err = p.communicate(timeout=timeout)
                code = p.returncode
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                out, err = p.communicate()
                code = None
            results.append({"step": step, "returncode": code, "stdout": out, "stderr": err})
        elif kind == "leave_free":
            st = os.statvfs(mnt)
            free = st.f_bavail * st.f_frsize
            with open(step[1], "wb") as fh:
                fh.write(b"\0" * max(free - step[2], 0))
            st = os.statvfs(mnt)
            results.append({"step": step, "free": st.f_bavail * st.f_frsize})
        elif kind == "rm":
            os.unlink(step[1])
            results.append({"step": step})
        elif kind == "copy":
            shutil.copyfile(step[1], step[2])
            results.append({"step": step})
        elif kind == "chmod":
            os.chmod(step[1], step[2])
            results.append({"step": step})
        elif kind == "remount":
            subprocess.run(["mount", "-o", "remount," + step[1], mnt], check=True)
            results.append({"step": step})
        elif kind == "ls":
            results.append({"step": step, "files": files(False)})
        elif kind == "snapshot":
            results.append({"step": step, "files": files(True)})
finally:
    subprocess.run(["umount", mnt])
print(json.dumps(results))
"""


def namespace_prefix() -> list[str]:
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs unshare(1) for a private tmpfs")
    prefix = [unshare, "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        prefix = [unshare, "--user", "--map-root-user", "--mount", "--propagation", "private"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here ({probe.stderr.strip()})")
    return prefix


def on_tmpfs(tmp_path: Path, size: int, steps: list, timeout: float = 600) -> tuple[Path, list[dict]]:
    """Run ``steps`` (paths may use ``{mnt}``) with a tmpfs of ``size`` bytes at ``tmp_path/mnt``;
    return the mount point and the results of every step."""
    mnt = tmp_path / "mnt"
    mnt.mkdir(exist_ok=True)

    def fill(x):
        if isinstance(x, str):
            return x.replace("{mnt}", str(mnt))
        if isinstance(x, list):
            return [fill(v) for v in x]
        return x

    spec = {
        "mnt": str(mnt),
        "python": sys.executable,
        "mpiexec": MPIEXEC,
        "env": _env(),
        "cwd": str(ROOT),
        "size": size,
        "steps": fill(steps),
    }
    proc = subprocess.run(
        [*namespace_prefix(), sys.executable, "-c", DRIVER, json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-5000:]
    return mnt, json.loads(proc.stdout.strip().splitlines()[-1])

"""Which process runs a trial: a token ``host:pid:start time`` each trial records, so that a
trial left RUNNING by a process that is gone can be told from one still running (a reused
pid is not taken for the process that died)."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def process_token() -> str:
    """``host:pid:start`` of this process: a RUNNING trial whose process is gone is stale."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_time(os.getpid())}"


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), so that a reused pid is
    not taken for the process that died; '' where /proc is not there."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return text.rsplit(")", 1)[1].split()[19]


def token_alive(token: str) -> bool | None:
    """Whether the process of ``token`` still runs: None when it ran on another host."""
    host, _, rest = token.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return None
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _start_time(pid) == start

"""``synapto bench nn``: small-network timing, synapto's numpy against PyTorch (optional).

Forward (inference) time at batch sizes 1, 16 and 128, and training step time
(forward + backward + Adam) at 128 and 4000 rows, for the PPO MLPs (hidden 32 32 and
64 64, BipedalWalker's 24 inputs and 4 outputs) and the Hebbian DAG (hidden 8 8;
forward only: it is evolved, not trained).  Each figure is the median of ``repeats``
timings of ``number`` calls, in microseconds per call.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from synapto.bench.common import md_table
from synapto.common.errors import UsageError
from synapto.common.folders import check_out_dir
from synapto.envs import SpaceInfo

OBS, ACT = 24, 4
FORWARD_BATCHES = (1, 16, 128)
TRAIN_BATCHES = (128, 4000)


def time_call(fn: Callable[[], object], number: int, repeats: int) -> float:
    """Median over ``repeats`` of the mean time of ``number`` calls (microseconds)."""
    fn()
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t) / number * 1e6)
    return statistics.median(out)


def numpy_mlp(hidden, rng):
    from synapto.ppo.adam import Adam
    from synapto.ppo.nn import MLP, init_params

    sizes = (OBS, *hidden, ACT)
    net = MLP(sizes, init_params(sizes, rng))
    opt = Adam(net.params.size, 3e-4)

    def forward(x):
        return net.forward1(x[0]) if x.shape[0] == 1 else net.forward(x)

    def train(x, target):
        ws = net.workspace(x.shape[0])
        y = net.forward(x, ws)
        net.backward(ws, (y - target) * (2.0 / y.size))
        opt.step(net.params, net.grad)

    return forward, train


def numpy_dag(hidden, rng):
    from synapto.agents.hebbian_dag import HebbianDAG

    space = SpaceInfo(OBS, ACT, False, -np.ones(ACT), np.ones(ACT), 1600)
    agent = HebbianDAG(space, tuple(hidden))
    genome = agent.init_genome(rng)
    policy = agent.policy(genome)
    batch_policies = {}

    def forward(x):
        if x.shape[0] == 1:
            if policy._t >= policy._rows - 1:
                policy.reset()
            return policy.act(x[0])
        n = x.shape[0]
        if n not in batch_policies:
            batch_policies[n] = agent.batch_policy(np.repeat(genome[None], n, axis=0), want_stats=True)
        return batch_policies[n].act(x)

    return forward, None


def torch_mlp(hidden, rng):
    import torch

    torch.set_num_threads(1)
    layers, a = [], OBS
    for h in hidden:
        layers += [torch.nn.Linear(a, h), torch.nn.Tanh()]
        a = h
    net = torch.nn.Sequential(*layers, torch.nn.Linear(a, ACT)).double()
    opt = torch.optim.Adam(net.parameters(), lr=3e-4)

    def forward(x):
        with torch.no_grad():
            return net(torch.from_numpy(x))

    def train(x, target):
        opt.zero_grad()
        loss = ((net(torch.from_numpy(x)) - torch.from_numpy(target)) ** 2).mean()
        loss.backward()
        opt.step()

    return forward, train


def run_nn(repeats: int = 5, scale: float = 1.0, torch: str = "auto") -> dict:
    """All measurements; ``scale`` multiplies the number of calls per timing."""
    rng = np.random.default_rng(0)
    impls = [
        ("numpy", "MLP 32 32", lambda: numpy_mlp((32, 32), rng)),
        ("numpy", "MLP 64 64", lambda: numpy_mlp((64, 64), rng)),
        ("numpy", "Hebbian DAG 8 8", lambda: numpy_dag((8, 8), rng)),
    ]
    have_torch = False
    if torch != "off":
        try:
            import torch as _t  # noqa: F401

            have_torch = True
        except ImportError:
            pass
    if have_torch:
        impls += [
            ("torch", "MLP 32 32", lambda: torch_mlp((32, 32), rng)),
            ("torch", "MLP 64 64", lambda: torch_mlp((64, 64), rng)),
        ]
    rows = []
    for lib, net, make in impls:
        forward, train = make()
        row: dict[str, Any] = {"library": lib, "network": net}
        for b in FORWARD_BATCHES:
            x = rng.standard_normal((b, OBS))
            row[f"forward_{b}"] = time_call(partial(forward, x), max(1, int(2000 * scale / b**0.5)), repeats)
        for b in TRAIN_BATCHES:
            if train is None:
                row[f"train_{b}"] = None
                continue
            x, t = rng.standard_normal((b, OBS)), rng.standard_normal((b, ACT))
            row[f"train_{b}"] = time_call(partial(train, x, t), max(1, int(20000 * scale / b)), repeats)
        rows.append(row)
    return {
        "torch": have_torch,
        "repeats": repeats,
        "scale": scale,
        "rows": rows,
        "units": "microseconds per call (median)",
    }


def table(data: dict) -> str:
    cols = [f"forward_{b}" for b in FORWARD_BATCHES] + [f"train_{b}" for b in TRAIN_BATCHES]
    heads = (
        ["library", "network"]
        + [f"forward {b} (µs)" for b in FORWARD_BATCHES]
        + [f"train {b} (µs)" for b in TRAIN_BATCHES]
    )

    def fmt(v):
        return "–" if v is None else f"{v:,.1f}"

    return md_table(
        heads,
        ([r["library"], r["network"], *(fmt(r[c]) for c in cols)] for r in data["rows"]),
        align="ll" + "r" * len(cols),
    )


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("nn")
    def bench_nn(
        repeats: Annotated[int, typer.Option(help="Timings per figure (the median is reported).")] = 5,
        scale: Annotated[float, typer.Option(help="Multiplies the calls per timing (smaller: faster, noisier).")] = 1.0,
        torch: Annotated[str, typer.Option(help="auto: include PyTorch when installed; off: numpy only.")] = "auto",
        out_dir: Annotated[Path, typer.Option(help="Where nn.md and nn.json go.")] = Path("bench"),
    ):
        """Small-network timing: forward at batch 1/16/128, training step at 128/4000 rows."""
        if torch not in ("auto", "off"):
            raise UsageError(f"--torch must be 'auto' or 'off', got {torch!r}")
        if repeats < 1 or scale <= 0:
            raise UsageError("--repeats must be >= 1 and --scale > 0")

        check_out_dir(out_dir)  # before minutes of measuring
        data = run_nn(repeats, scale, torch)
        md = table(data)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "nn.json").write_text(json.dumps(data, indent=2))
        note = "" if data["torch"] else "\n\nPyTorch not installed: numpy only."
        (out_dir / "nn.md").write_text(f"# bench nn ({data['units']})\n\n{md}{note}\n")
        print(md + note)
        print(f"-> {out_dir / 'nn.md'}, {out_dir / 'nn.json'}")

"""The run commands' options (``evolve``, ``ppo``): which values the command line gave
(they win over a ``--config`` file's), the values of KEY=VALUE options and TOML tables
(``--strategy-option``, ``--agent-option``, ``--env-option``, ``[strategy_options]`` ...),
the seeds and their run files, and checks that every MPI rank must agree on.  Shared by
:mod:`synapto.evolution.command` and :mod:`synapto.ppo.command`, and by the configs'
``from_toml``.  Reads no argv: the commands hand it what typer parsed.  The commands log
through :func:`synapto.common.logs.say`."""

from __future__ import annotations

import re
from pathlib import Path

from synapto.common.config import tomllib
from synapto.common.errors import UsageError


def key_values(option: str, items: list[str] | None) -> dict:
    """``--OPTION KEY=VALUE`` (repeatable) -> ``{key: value}``; values are TOML literals
    (``3``, ``0.5``, ``true``, ``"text"``), else text."""
    out = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{option} expects KEY=VALUE, got {item!r}")
        out[key.strip().replace("-", "_")] = _literal(text.strip())
    return out


def table(values: dict, key: str) -> dict:
    """A TOML table of ``key`` (``[agent_options]``...), checked; its keys may use dashes or
    underscores, as a config file's own keys (``weight-decay`` is ``weight_decay``)."""
    opts = values.pop(key, {})
    if not isinstance(opts, dict):
        raise UsageError(f"{key} must be a table of option = value, got {opts!r}")
    out = {str(k).replace("-", "_"): v for k, v in opts.items()}
    if len(out) < len(opts):
        twice = sorted(k for k in out if sum(str(o).replace("-", "_") == k for o in opts) > 1)
        raise UsageError(f"[{key}] sets {', '.join(twice)} twice (dashes and underscores name the same option)")
    return out


def layer_sizes(option: str, values) -> tuple[int, ...]:
    """Hidden layer sizes as the command line gives them, one spelling for ``evolve --hidden``
    and ``ppo --hid``: ``8 8``, ``8,8``, ``"[8, 8]"`` or ``"(8, 8)"`` -> ``(8, 8)``; ``"[]"``:
    none.  Integers only (each command checks their range)."""
    if isinstance(values, (str, int)):
        values = [values]
    example = f'e.g. {option} 8 8, {option} 8,8 or {option} "[8,8]"'
    sizes: list[int] = []
    for value in values:
        text = str(value).strip()
        bracketed = text[:1] in "[(" and text[-1:] in "])"
        body = text[1:-1] if bracketed else text
        parts = [p for p in re.split(r"[,\s]+", body.strip()) if p]
        if not parts and not bracketed:
            raise UsageError(f"{option} {value!r} is not a layer size; expected {example}")
        for part in parts:
            try:
                sizes.append(int(part))
            except ValueError:
                raise UsageError(f"{option} {value!r} does not parse; expected integers, {example}") from None
    return tuple(sizes)


def hidden_layers(value):
    """A config's ``hidden``: a list of layer sizes, or one integer for one hidden layer
    (``hidden = 8`` is ``[8]``, as ``--hidden 8`` and PPO's ``hid = 8`` are); ``0`` or ``[0]``
    is no hidden layer.  Any other value is returned unchanged, for the config's own check
    to refuse in one line."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if isinstance(value, (list, tuple)) and list(value) == [0]:
        return []
    return value


def _literal(text: str):
    """A TOML literal (number, true/false, quoted string), else the text itself."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


# --------------------------------------------------------------------------- the command line's values


def given_on_command_line(ctx, names) -> set[str]:
    """The parameters of ``names`` that the command line (or the environment) set: the
    others keep their shown default, and a ``--config`` file's value wins over it."""
    out = set()
    for name in names:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
            out.add(name)
    return out


def given_values(ctx, params: dict) -> dict:
    """The entries of ``params`` (option name: parsed value) that the command line set."""
    return {k: params[k] for k in given_on_command_line(ctx, params)}


# --------------------------------------------------------------------------- seeds and run files


def out_for_seed(out: Path, seed: int, n_seeds: int) -> Path:
    """The run file of ``seed`` among ``n_seeds``: ``out`` itself for one, else ``_s<seed>``
    inserted before its suffix (``.h5`` when it has none)."""
    if n_seeds <= 1:
        return out
    suffix = out.suffix or ".h5"
    return out.with_name(f"{out.stem}_s{seed}{suffix}")


def check_distinct(seeds, outs=None) -> None:
    """Several seeds run one after another into their own run files (``outs``, by default
    one per seed): never one seed, or one file, twice."""
    outs = seeds if outs is None else outs
    if len(set(outs)) != len(outs):
        raise UsageError(f"--seed has repeated values {seeds}")


def agree(comm, rank: int, check) -> None:
    """Run ``check()`` on rank 0 only (file-system checks) and make every rank raise its error."""
    error = None
    if rank == 0:
        try:
            check()
        except UsageError as exc:
            error = str(exc)
    if comm is not None:
        error = comm.bcast(error, root=0)
    if error is not None:
        raise UsageError(error)

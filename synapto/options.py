"""Values of KEY=VALUE options and TOML tables (``--strategy-option``, ``--agent-option``,
``--env-option``, ``[strategy_options]`` ...), shared by the evolve command and its checks.
Reads no argv: :mod:`synapto.cli` hands it what typer parsed."""

from __future__ import annotations

from synapto.errors import UsageError

#: strategy options that have a command-line flag (and a top-level TOML key) of their own
STRATEGY_SHORTHANDS = ("sigma", "lr", "prune", "mutation_std")


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
    """A TOML table of ``key`` (``[agent_options]``...), checked."""
    opts = values.pop(key, {})
    if not isinstance(opts, dict):
        raise UsageError(f"{key} must be a table of option = value, got {opts!r}")
    return dict(opts)


def strategy_options(values: dict, extra: list[str] | None) -> dict:
    """Pop the strategy's options out of ``values`` (a TOML ``[strategy_options]`` table,
    then the shorthand keys, then ``--strategy-option KEY=VALUE``, later ones winning)."""
    opts = table(values, "strategy_options")
    for key in STRATEGY_SHORTHANDS:
        if key in values:
            opts[key] = values.pop(key)
    opts.update(key_values("--strategy-option", extra))
    if "prune" in opts and isinstance(opts["prune"], str):
        word = opts["prune"].lower()
        if word not in ("on", "off"):
            raise UsageError(f"--prune must be 'on' or 'off', got {opts['prune']!r}")
        opts["prune"] = word == "on"
    return opts


def _literal(text: str):
    """A TOML literal (number, true/false, quoted string), else the text itself."""
    from synapto.config import tomllib

    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text

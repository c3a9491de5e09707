"""How long a run should take: ``evolve --check``'s estimate, and the default experiment's.

A run's wall time is its env steps times the CPU one env step costs, everything included
(the env, the policy, the strategy), shared by its workers.  That cost depends on the env
and on where training episodes run (:data:`COSTS`: envpool's C++ Box2D steps BipedalWalker
at about half gymnasium's cost); validation, the final selection and the test run
gymnasium's env.  The figures were measured with ``scripts/step_costs.py`` on a shared
2-core machine (the shipped configs' agents, one process, early generations); a run on
W >= 2 workers keeps about :data:`EFFICIENCY` of its W cores busy (its coordinator, the
waits at the end of each generation): ``bipedal_fast`` seed 1 took 12:08 on 2 idle
workers, and this model says 12.2 minutes.
"""

from __future__ import annotations

import math

#: microseconds of CPU per env step, everything included, by (env, training backend):
#: ``scripts/step_costs.py`` on a 2-core machine
COSTS = {
    ("BipedalWalker-v3", "gymnasium"): 179,
    ("BipedalWalker-v3", "envpool"): 98,
    ("LunarLander-v3", "gymnasium"): 54,
    ("LunarLander-v3", "envpool"): 43,
    ("CartPole-v1", "gymnasium"): 7,  # numpy-batched episodes (--batch auto)
    ("HalfCheetah-v5", "gymnasium"): 63,
    ("Hopper-v5", "gymnasium"): 162,
    ("Walker2d-v5", "gymnasium"): 217,
    ("Swimmer-v5", "gymnasium"): 93,
}
#: envs that cost what another does
SAME_AS = {"LunarLanderContinuous-v3": "LunarLander-v3"}
#: the figure of an env without one of its own (the default experiment's env)
FALLBACK = ("LunarLander-v3", "gymnasium")
#: env steps of an episode where it is not the env's time limit (LunarLander champions land in about 300)
EPISODE_STEPS = {"LunarLander-v3": 300, "LunarLanderContinuous-v3": 300}
#: final candidates re-evaluated on the selection episodes (at most; a strategy's own number)
SELECT_CANDIDATES = 5
#: the share of W >= 2 idle cores a run on W workers keeps busy (fitted to bipedal_fast's 12:08)
EFFICIENCY = 0.8


def step_cost(env: str, backend: str = "gymnasium") -> tuple[float, bool]:
    """``(CPU seconds per env step, whether the env has a figure of its own)``."""
    env = SAME_AS.get(env, env)
    if (env, backend) in COSTS:
        return COSTS[env, backend] * 1e-6, True
    if (env, "gymnasium") in COSTS:  # a backend without a figure: gymnasium's
        return COSTS[env, "gymnasium"] * 1e-6, True
    return COSTS[FALLBACK] * 1e-6, False


def episode_steps(cfg) -> int:
    """Env steps of one of ``cfg``'s episodes at most: its ``max_episode_steps``, else
    :data:`EPISODE_STEPS`, else the env's own time limit (1,000 when it has none)."""
    cap = int(cfg.make_kwargs.get("max_episode_steps") or 0)
    if cap > 0:
        return cap
    if cfg.env in EPISODE_STEPS:
        return EPISODE_STEPS[cfg.env]
    try:
        import gymnasium

        return int(gymnasium.spec(cfg.env).max_episode_steps or 1000)
    except Exception:  # an env that registers itself on import, or none: a round figure
        return 1000


def phase_steps(cfg) -> tuple[float, float]:
    """``(training env steps, other env steps)`` of a run of ``cfg``: its env-step budget --
    or, when fewer, its generations' episodes -- shared between training and validation as
    their episodes per generation are, plus the final selection and test."""
    length = episode_steps(cfg)
    cap = cfg.envs.shaping.cap_steps
    train = cfg.population * cfg.episodes * (min(length, cap) if cap else length)
    validation = cfg.validation_count * cfg.validate_episodes * length
    steps = float(cfg.generations * (train + validation))
    if cfg.max_env_steps:
        steps = min(steps, float(cfg.max_env_steps))
    final = (cfg.select_episodes * SELECT_CANDIDATES + cfg.test_episodes) * length
    share = train / max(train + validation, 1)
    return steps * share, steps * (1 - share) + final


def expected_seconds(cfg, workers: int) -> float:
    """Wall-clock seconds a run of ``cfg`` should take on ``workers`` idle cores (0: one process)."""
    train, other = phase_steps(cfg)
    cpu = train * step_cost(cfg.env, cfg.envs.train_backend)[0] + other * step_cost(cfg.env)[0]
    return cpu / (workers * EFFICIENCY if workers >= 2 else 1)


def basis(cfg) -> str:
    """The figures an estimate of ``cfg`` rests on, in words."""
    backend = cfg.envs.train_backend
    cost, known = step_cost(cfg.env, backend)
    if not known:
        return f"no figure for {cfg.env}: at {FALLBACK[0]}'s {cost * 1e6:.0f} us of CPU per env step"
    other = step_cost(cfg.env)[0]
    if other != cost:
        return (
            f"{cfg.env}: {cost * 1e6:.0f} us of CPU per training step on {backend}, "
            f"{other * 1e6:.0f} per other step, measured on 2 cores"
        )
    return f"{cfg.env}: {cost * 1e6:.0f} us of CPU per env step, measured on 2 cores"


def expect(seconds: float) -> str:
    """``expect about 13 min`` (whole minutes, rounded up), or ``expect under a minute``."""
    return "expect under a minute" if seconds < 60 else f"expect about {math.ceil(seconds / 60)} min"


def estimate(cfg, workers: int) -> str:
    """The time a run of ``cfg`` should take, with the cores it assumes (``--check``)."""
    return f"{expect(expected_seconds(cfg, workers))} with {max(workers, 1)} core(s) to itself ({basis(cfg)})"

"""The recipe a run's farm is set up with: the env, the agent, the shaping of training
episodes, and the worker's evaluator by name (:class:`EvolveSpec`).  It stands above the
evaluators it names, so that none of them imports another's recipe."""

from __future__ import annotations

from dataclasses import dataclass, field

from synapto.evolution.worker.batched import BatchedEvaluator
from synapto.evolution.worker.evaluate import Evaluator
from synapto.evolution.worker.fast_box2d import FastEvaluator
from synapto.shaping import Shaping

#: the evaluators a run's farm can be set up with (:attr:`EvolveSpec.evaluator`), by name
EVALUATORS: dict[str, type[Evaluator | BatchedEvaluator | FastEvaluator]] = {
    "serial": Evaluator,
    "batched": BatchedEvaluator,
    "envpool": FastEvaluator,
}


@dataclass(frozen=True)
class EvolveSpec:
    """Picklable recipe a worker builds its handler from (farm setup): the env, the agent,
    and the evaluator by name -- ``"serial"`` (one env at a time,
    :class:`~synapto.evolution.worker.evaluate.Evaluator`), ``"batched"`` (numpy-batched envs,
    :class:`~synapto.evolution.worker.batched.BatchedEvaluator`) or ``"envpool"`` (training
    episodes on envpool, :class:`~synapto.evolution.worker.fast_box2d.FastEvaluator`); the last
    two hand single tasks to the first.  The farm of a run is set up with it by
    :func:`~synapto.evolution.worker.batched.batching_farm`, that of its replay directly."""

    env: str
    agent: str
    hidden: tuple
    agent_options: dict
    make_kwargs: dict = field(default_factory=dict)  #: gymnasium.make's keyword arguments (env options)
    shaping: Shaping | None = None  #: the run's :class:`synapto.shaping.Shaping` of training episodes (None: none)
    evaluator: str = "serial"  #: one of :data:`EVALUATORS`

    def build(self) -> Evaluator | BatchedEvaluator | FastEvaluator:
        if self.evaluator not in EVALUATORS:
            raise ValueError(f"evaluator must be one of {', '.join(EVALUATORS)}, got {self.evaluator!r}")
        return EVALUATORS[self.evaluator](self)

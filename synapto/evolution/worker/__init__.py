"""What runs inside a worker rank: the evaluation of individuals.

- :mod:`.tasks`       what travels between the coordinator and a worker: tasks, results,
  the context a map's tasks share
- :mod:`.evaluate`    one env at a time: the rollouts and the worker's :class:`~.evaluate.Evaluator`
- :mod:`.vector_env`  numpy-batched envs whose sub-envs start as seeded single envs
- :mod:`.batched`     many (individual, episode) rows in lockstep on one vector env
- :mod:`.fast_box2d`  training episodes of Box2D tasks on envpool, in lockstep
- :mod:`.spec`        the recipe a farm is set up with: the evaluator above, by name

Nothing here imports the coordinator's side of :mod:`synapto.evolution` (the loop,
the generation, the strategies) nor :mod:`synapto.store` (``tests/test_layering.py``).
The coordinator builds the tasks (:mod:`.tasks`) and sets its farm up with the recipe
(:class:`~.spec.EvolveSpec`, :func:`~.batched.batching_farm`).
"""

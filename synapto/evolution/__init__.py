"""Evolution on the coordinator: the generation loop (:mod:`.loop`, :mod:`.generation`),
the strategies that make the next generation (:mod:`.strategies`), replay
(:mod:`.replay`); and, in :mod:`.worker`, what the worker ranks run: the rollouts of
individuals (:mod:`.worker.evaluate`, batched on numpy-batched envs in
:mod:`.worker.batched`, on envpool in :mod:`.worker.fast_box2d`)."""

"""Evolution on the coordinator: the generation loop (:mod:`.loop`, :mod:`.generation`),
the strategies that make the next generation (:mod:`.strategies`), and the rollouts of
individuals (:mod:`.evaluate`, batched on numpy-batched envs in :mod:`.batched`)."""

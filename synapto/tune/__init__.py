"""``synapto tune``: hyperparameter search over a base config with Optuna.

One concept per module:

- :mod:`.space`: the search space file (what is sampled, and the benchmark seeds tuning refuses);
- :mod:`.score`: the objective, a champion's mean return on the TUNE stream (never the test stream);
- :mod:`.trial`: one trial: the base config with the sampled values, run on each tuning seed,
  reporting validation means at fixed env-step milestones to the pruner;
- :mod:`.storage`: the database: made safely by processes that start together, opened
  read-only by ``--report``;
- :mod:`.study`: the study in its database: opening it, checking that a rerun is the same
  study, sharing it between processes, and recovering trials a killed process left RUNNING;
- :mod:`.process`: the token of the process running a trial (is it still alive?);
- :mod:`.best`: the best trial's config, written as a TOML that ``evolve --config`` runs;
- :mod:`.report`: ``tune --report``: the table of trials and the plots;
- :mod:`.cli`: the command.

Optuna is the ``tune`` extra: nothing here imports it at module level except
:mod:`.study`, :mod:`.trial` and :mod:`.report`, which :mod:`.cli` imports after checking it.
"""

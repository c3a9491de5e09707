"""PPO baseline on synapto's MPI scaffolding: Spinning Up's PPO-clip in numpy.

- :mod:`synapto.ppo.nn`        tanh MLP, hand-written backpropagation
- :mod:`synapto.ppo.adam`      Adam on a flat parameter vector
- :mod:`synapto.ppo.policy`    Gaussian / categorical heads, policy, value function, PPO-clip loss
- :mod:`synapto.ppo.buffer`    one epoch of experience, GAE-lambda, reward-to-go, bootstrapping
- :mod:`synapto.ppo.env`       the env a rank steps (its episode limit, the bare env's step)
- :mod:`synapto.ppo.rollout`   one rank's rollout of one epoch
- :mod:`synapto.ppo.train`     the training loop and everything it sends over MPI
- :mod:`synapto.ppo.evaluate`  ``ppo-eval``: the deterministic test of a trained policy
- :mod:`synapto.ppo.progress`  Spinning Up's progress.txt and config.json (the run file: :mod:`synapto.store.ppo`)
- :mod:`synapto.ppo.config`    PPOConfig and TOML loading
- :mod:`synapto.ppo.cli`       ``synapto ppo``, ``synapto ppo-eval``, ``synapto bench ppo``
"""

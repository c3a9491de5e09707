"""Numpy-batched environments whose sub-envs start exactly where single envs start.

:class:`SeededVectorEnv` wraps a gymnasium vector env (``vector_entry_point``) so that
sub-env ``r`` starts from the state a fresh single env reset with seed ``s_r`` starts
in, and can be refilled, cleared and compacted row by row; :class:`CartPoleStep` runs
gymnasium's CartPole dynamics on preallocated buffers, bit for bit.  Used by the
batched evaluation (:mod:`synapto.evolution.worker.batched`), whose docstring states the
semantics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from synapto.envs import _gym, import_env_module, make_env


class CartPoleStep:
    """gymnasium's ``CartPoleVectorEnv.step`` without its per-call overhead (the action
    space check, fresh arrays per operation, random autoresets): the same float64
    operations in the same order on preallocated buffers, so states are bit for bit
    those of the vector env and of the single env (tests).  Ended sub-envs are not
    reset; their rows are masked by the caller and refilled or dropped."""

    def __init__(self, u):
        self.u = u
        self.unit_reward = True

    @staticmethod
    def applies(u) -> bool:
        try:
            from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
        except ImportError:  # pragma: no cover
            return False
        return (
            type(u) is CartPoleVectorEnv
            and u.kinematics_integrator == "euler"
            and not getattr(u, "_sutton_barto_reward", False)
        )

    def start(self, states: np.ndarray) -> None:
        n = states.shape[1]
        self.state = np.ascontiguousarray(states, dtype=np.float64)
        self.steps = np.zeros(n, np.int64)
        self.obs_t = self.state.astype(np.float32)  # (4, n): obs rows last
        self.obs = self.obs_t.T
        self._b = np.zeros((4, n))
        self._acc = np.zeros((2, n))  # xacc, thetaacc
        self._pair = np.zeros((2, n))
        self._over = np.zeros((2, n), bool)
        self._limits = np.array([[self.u.x_threshold], [self.u.theta_threshold_radians]])
        self._term = np.zeros(n, bool)
        self._trunc = np.zeros(n, bool)
        self._reward = np.ones(n, np.float32)

    def step(self, action):
        u, st, b = self.u, self.state, self._b
        theta, theta_dot = st[2], st[3]
        force, cos, sin, temp = b
        xacc, acc = self._acc
        # force = sign(action - 0.5) * force_mag, for actions 0 and 1
        np.multiply(action, 2.0 * u.force_mag, out=force)
        force -= u.force_mag
        np.cos(theta, out=cos)
        np.sin(theta, out=sin)
        # temp = (force + polemass_length * theta_dot ** 2 * sin) / total_mass
        np.square(theta_dot, out=temp)
        np.multiply(u.polemass_length, temp, out=temp)
        temp *= sin
        np.add(force, temp, out=temp)
        temp /= u.total_mass
        # thetaacc = (gravity * sin - cos * temp) / (length * (4/3 - masspole * cos ** 2 / total_mass))
        np.square(cos, out=force)
        np.multiply(u.masspole, force, out=force)
        force /= u.total_mass
        np.subtract(4.0 / 3.0, force, out=force)
        np.multiply(u.length, force, out=force)
        np.multiply(u.gravity, sin, out=acc)
        np.multiply(cos, temp, out=sin)
        acc -= sin
        acc /= force
        # xacc = temp - polemass_length * thetaacc * cos / total_mass
        np.multiply(u.polemass_length, acc, out=force)
        force *= cos
        force /= u.total_mass
        np.subtract(temp, force, out=xacc)
        # Euler, positions (x, theta) from the old velocities, then velocities
        pos, vel, pair = st[0::2], st[1::2], self._pair
        np.multiply(u.tau, vel, out=pair)
        pos += pair
        np.multiply(u.tau, self._acc, out=pair)
        vel += pair
        # terminated: |x| > x_threshold or |theta| > theta_threshold
        np.abs(pos, out=pair)
        np.greater(pair, self._limits, out=self._over)
        np.logical_or(self._over[0], self._over[1], out=self._term)
        self.steps += 1
        np.greater_equal(self.steps, u.max_episode_steps, out=self._trunc)
        np.copyto(self.obs_t, st, casting="same_kind")
        return self.obs, self._reward, self._term, self._trunc

    def load(self, slots, states) -> None:
        self.state[:, slots] = states
        self.steps[slots] = 0
        self.obs_t[:, slots] = states  # the single env's obs: its state as float32

    def clear(self, slots) -> None:
        """Park ended sub-envs at rest (their values are not used)."""
        self.state[:, slots] = 0.0

    def compact(self, keep) -> None:
        steps = self.steps[keep]
        self.start(self.state[:, keep])
        self.steps = steps


class SeededVectorEnv:
    """A gymnasium vector env whose sub-envs start from per-seed single-env resets.

    Made once per worker and reused for every chunk.  For gymnasium's CartPole the
    dynamics run through :class:`CartPoleStep`; other supported vector envs are
    stepped through their unwrapped ``step``.
    """

    def __init__(self, env_id: str):
        self.gym = _gym()
        self.env_id = env_id
        self.single = make_env(env_id)
        self._initial_cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.vec: Any = None  # gymnasium's vector env, made by the first _resize
        self.fast: CartPoleStep | None = None
        self.unit_reward = False
        # a faster way to a seed's initial state (checked against real resets)
        self._quick: Callable[[int], tuple[np.ndarray, np.ndarray]] | None = None

    @staticmethod
    def supported(env_id: str) -> str | None:
        """None if ``env_id`` can be batched, else the reason why not."""
        gym = _gym()
        import_env_module(env_id)
        try:
            spec = gym.spec(env_id)
        except gym.error.Error as exc:
            return f"not registered ({exc})"
        if getattr(spec, "vector_entry_point", None) is None:
            return "no vector entry point"
        try:
            vec = gym.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point")
            vec.reset(seed=0)
            u = vec.unwrapped
            single = make_env(env_id)
            single.reset(seed=0)
            ok = (
                isinstance(getattr(u, "state", None), np.ndarray)
                and u.state.shape[-1] == 2
                and hasattr(u, "steps")
                and hasattr(u, "prev_done")
                and str(vec.metadata.get("autoreset_mode", "")).endswith("NEXT_STEP")
                and isinstance(getattr(single.unwrapped, "state", None), np.ndarray)
                and single.unwrapped.state.shape == u.state.shape[:-1]
            )
            vec.close()
            single.close()
        except Exception as exc:  # a vector env we do not understand: one at a time
            return f"vector env not usable ({type(exc).__name__}: {exc})"
        return None if ok else "vector env keeps no per-sub-env state array"

    def _initial(self, seed: int):
        hit = self._initial_cache.get(seed)
        if hit is None:
            if self._quick is not None:
                hit = self._quick(seed)
            else:
                obs, _ = self.single.reset(seed=seed)
                hit = (np.array(self.single.unwrapped.state, dtype=np.float64), np.asarray(obs))
            if len(self._initial_cache) > 65536:
                self._initial_cache.clear()
            self._initial_cache[seed] = hit
        return hit

    def _single_initial(self, seed: int):
        obs, _ = self.single.reset(seed=seed)
        return np.array(self.single.unwrapped.state, dtype=np.float64), np.asarray(obs)

    @staticmethod
    def _cartpole_initial(seed: int):
        """CartPole's reset without the env: gymnasium seeds a PCG64 Generator with
        ``SeedSequence(seed)`` and draws the state uniformly from [-0.05, 0.05)
        (about a third of a reset's 50 us; used only after it matched real resets)."""
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
        state = rng.uniform(low=-0.05, high=0.05, size=(4,))
        return state, np.array(state, dtype=np.float32)

    def _check_quick(self) -> None:
        """Use :meth:`_cartpole_initial` if it gives the single env's resets, bit for bit."""
        seeds = [0, 1, 2, 7, 12345, 2**31 - 1, 2**40 + 3, 2**62 + 11]
        ok = all(
            np.array_equal(a, b) and a.dtype == b.dtype
            for s in seeds
            for a, b in zip(self._cartpole_initial(s), self._single_initial(s))
        )
        self._quick = self._cartpole_initial if ok else None

    def _initials(self, seeds):
        """Initial states (state_dim, n) and observations (n, obs_dim) of ``seeds``; each
        distinct seed is reset once (common random numbers share a few)."""
        uniq, inverse = np.unique(np.asarray(seeds), return_inverse=True)
        states, obs = zip(*(self._initial(int(s)) for s in uniq))
        return np.stack(states, axis=-1)[..., inverse], np.stack(obs)[inverse]

    def _resize(self, n: int) -> None:
        """The vector env with ``n`` sub-envs (made once; later resized in place)."""
        from gymnasium.vector.utils import batch_space

        if self.vec is None:
            self.vec = self.gym.make_vec(self.env_id, num_envs=n, vectorization_mode="vector_entry_point")
            self.vec.reset(seed=0)
            u = self.vec.unwrapped
            self.fast = CartPoleStep(u) if CartPoleStep.applies(u) else None
            self.unit_reward = self.fast is not None
            if self.fast is not None:
                self._check_quick()
        u = self.vec.unwrapped
        if self.fast is None and u.num_envs != n:
            u.num_envs = n
            u.action_space = batch_space(u.single_action_space, n)
            u.observation_space = batch_space(u.single_observation_space, n)

    def start(self, seeds) -> np.ndarray:
        """Sub-env ``i`` starts episode ``seeds[i]``; returns the observations (n, obs_dim)."""
        n = len(seeds)
        self._resize(n)
        states, obs = self._initials(seeds)
        if self.fast is not None:
            self.fast.start(states)
            return self.fast.obs
        u = self.vec.unwrapped
        u.state = states.astype(u.state.dtype)
        u.steps = np.zeros(n, dtype=u.steps.dtype)
        u.prev_done = np.zeros(n, dtype=bool)
        return obs

    # kept for callers of the former interface
    reset = start

    def step(self, actions):
        if self.fast is not None:
            return self.fast.step(actions)
        obs, reward, terminated, truncated, _ = self.vec.unwrapped.step(actions)
        return obs, reward, terminated, truncated

    def load(self, slots, seeds, obs: np.ndarray) -> None:
        """Sub-envs ``slots`` start episodes ``seeds``; their rows of ``obs`` are set."""
        states, first = self._initials(seeds)
        if self.fast is not None:
            self.fast.load(slots, states)
            return
        u = self.vec.unwrapped
        u.state[..., slots] = states
        u.steps[slots] = 0
        u.prev_done[slots] = False
        obs[slots] = first

    def clear(self, slots) -> None:
        if self.fast is not None:
            self.fast.clear(slots)

    def compact(self, keep: np.ndarray) -> None:
        """Keep only sub-envs ``keep`` (all running, so ``prev_done`` is False for them)."""
        if self.fast is not None:
            self.fast.compact(keep)
            return
        u = self.vec.unwrapped
        u.state = np.ascontiguousarray(u.state[..., keep])
        u.steps = u.steps[keep]
        u.prev_done = u.prev_done[keep]
        self._resize(len(keep))

    def close(self) -> None:
        if self.vec is not None:
            self.vec.close()
        self.single.close()

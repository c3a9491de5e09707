"""Noise keys: a centre strategy's samples, rebuilt anywhere from a few integers.

The distribution-based strategies (``openai-es``, ``pgpe``, separable ``cmaes``) make
every genome of a generation from the generation's centre, its step sizes and one row
of standard normal noise.  The coordinator draws those rows one after another from the
run's Generator (PCG64) and records, before each row, the state of the bit generator:
the row's *noise key* (:data:`KEY_WIDTH` unsigned 64-bit integers).  Whoever holds a
key draws the same row again, bit for bit (:func:`draw`).  numpy's Generator draws
normals one after another whatever the shape asked for, so rows drawn one by one equal
one draw of the whole matrix: runs are the same as when the noise was drawn at once.

So a generation is fully described by a :class:`Samples`: the centre, the step sizes
and the keys.  Workers receive it once per generation and each task carries only its
sample's index (as Salimans et al. 2017 and ARS exchange noise indices instead of
parameters); the run file stores it instead of the population (O(genome) per
generation instead of O(population x genome)); replay, the viz commands and
:class:`synapto.store.RunData` rebuild any individual exactly from it.

The arithmetic here is each strategy's own, operation for operation (the strategies
build their genomes through :meth:`Samples.genomes`), so a rebuilt genome equals the
one the strategy asked for in every bit, signed zeros included.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: unsigned 64-bit words of a noise key: PCG64's state (high, low), increment (high, low),
#: and its buffered 32-bit draw (flag, value)
KEY_WIDTH = 6
_MASK = (1 << 64) - 1

#: how a generation's genomes come from its rows of noise ``z`` (zero on pruned weights):
#: "mirrored": genome ``2j`` is ``centre + sigma * z_j``, genome ``2j + 1`` is ``centre - sigma * z_j``
#: (``sigma`` a number or one per weight: openai-es, pgpe);
#: "scaled": genome ``i`` is ``centre + sigma * (z_i * scale)`` on the surviving weights (separable CMA-ES)
KINDS = ("mirrored", "scaled")


def key_of(rng: np.random.Generator) -> np.ndarray | None:
    """The noise key of ``rng``'s next draw, or None if its bit generator is not PCG64."""
    state = rng.bit_generator.state
    if state.get("bit_generator") != "PCG64":
        return None
    s, inc = state["state"]["state"], state["state"]["inc"]
    return np.array(
        [s >> 64, s & _MASK, inc >> 64, inc & _MASK, state["has_uint32"], state["uinteger"]], dtype=np.uint64
    )


def generator_at(key: np.ndarray) -> np.random.Generator:
    """A Generator in the state that ``key`` records."""
    k = [int(x) for x in np.asarray(key, dtype=np.uint64)]
    bit = np.random.PCG64()
    bit.state = {
        "bit_generator": "PCG64",
        "state": {"state": (k[0] << 64) | k[1], "inc": (k[2] << 64) | k[3]},
        "has_uint32": k[4],
        "uinteger": k[5],
    }
    return np.random.Generator(bit)


def draw_rows(rng: np.random.Generator, rows: int, alive: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray | None]:
    """``(noise, keys)``: ``rows`` rows of standard normals on the coordinates ``alive``
    (indices; the others 0) of vectors of length ``n``, drawn from ``rng`` one row after
    another, and the key of each row (None if ``rng`` is not PCG64)."""
    noise = np.zeros((rows, n))
    keys = np.zeros((rows, KEY_WIDTH), dtype=np.uint64)
    for j in range(rows):
        key = key_of(rng)
        if key is None:  # no keys: the same numbers, drawn at once
            noise[j:, alive] = rng.standard_normal((rows - j, alive.size))
            return noise, None
        keys[j] = key
        noise[j, alive] = rng.standard_normal(alive.size)
    return noise, keys


def draw(key: np.ndarray, alive: np.ndarray, n: int) -> np.ndarray:
    """The row of noise that ``key`` starts: standard normals on ``alive``, 0 elsewhere."""
    z = np.zeros(n)
    z[alive] = generator_at(key).standard_normal(alive.size)
    return z


@dataclass(frozen=True, eq=False)
class Samples:
    """One generation's genomes, as the centre, the step sizes and the noise keys."""

    kind: str  #: one of :data:`KINDS`
    centre: np.ndarray  #: (n,); its zeros are the pruned weights, which get no noise
    sigma: float | np.ndarray  #: a number, or (n,) one per weight
    keys: np.ndarray  #: (rows, KEY_WIDTH) uint64: one row of noise per key
    scale: np.ndarray | None = None  #: (n,) per-weight scale of the noise ("scaled" only)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"samples kind must be one of {KINDS}, got {self.kind!r}")

    @property
    def population(self) -> int:
        return 2 * len(self.keys) if self.kind == "mirrored" else len(self.keys)

    @property
    def alive(self) -> np.ndarray:
        """Indices of the centre's surviving weights."""
        return np.flatnonzero(self.centre)

    def noise(self) -> np.ndarray:
        """Every row of noise, (rows, n)."""
        alive, n = self.alive, self.centre.size
        return np.stack([draw(k, alive, n) for k in self.keys]) if len(self.keys) else np.zeros((0, n))

    def genomes(self, noise: np.ndarray | None = None) -> np.ndarray:
        """The whole population, (population, n), from ``noise`` (its rows, as :meth:`noise`
        draws them; drawn here if None)."""
        z = self.noise() if noise is None else noise
        if self.kind == "mirrored":
            step = self.sigma * z
            out = np.empty((2 * z.shape[0], self.centre.size))
            out[0::2] = self.centre + step
            out[1::2] = self.centre - step
            return out
        alive, scale = self.alive, self.scaled()
        out = np.repeat(self.centre[None], z.shape[0], axis=0)
        out[:, alive] += self.sigma * (z[:, alive] * scale[alive])
        return out

    def scaled(self) -> np.ndarray:
        """The per-weight scale of "scaled" samples (the kind the other is "mirrored")."""
        if self.scale is None:
            raise ValueError(f"{self.kind!r} samples have no scale")
        return self.scale

    def genome(self, i: int) -> np.ndarray:
        """Genome ``i`` of the population, from its key alone."""
        if not 0 <= i < self.population:
            raise IndexError(f"sample {i} of a population of {self.population}")
        row = i // 2 if self.kind == "mirrored" else i
        z = draw(self.keys[row], self.alive, self.centre.size)
        if self.kind == "mirrored":
            step = self.sigma * z
            return self.centre + step if i % 2 == 0 else self.centre - step
        alive, scale = self.alive, self.scaled()
        out = self.centre.copy()
        out[alive] += self.sigma * (z[alive] * scale[alive])
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        """What the run file stores of a generation besides its centre (``/samples/<name>``)."""
        out = {"keys": self.keys, "sigma": np.asarray(self.sigma, dtype=np.float64)}
        if self.scale is not None:
            out["scale"] = np.asarray(self.scale, dtype=np.float64)
        return out

    @classmethod
    def from_arrays(cls, kind: str, centre: np.ndarray, arrays) -> Samples:
        sigma = np.asarray(arrays["sigma"], dtype=np.float64)
        return cls(
            kind,
            np.asarray(centre, dtype=np.float64),
            float(sigma) if sigma.ndim == 0 else sigma,
            np.asarray(arrays["keys"], dtype=np.uint64),
            np.asarray(arrays["scale"], dtype=np.float64) if "scale" in arrays else None,
        )

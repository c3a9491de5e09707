"""``synapto render``: an animation (GIF, or MP4 with ffmpeg) of a policy playing.

Evolution runs play the champion (the best so far if the run is unfinished), or
``--generation G --individual I``; episode ``e`` starts from the champion test's
seed ``test_seeds(run seed, n)[e]`` in a fresh env, exactly as the run's final
test did, so the champion's rendered returns equal the stored test returns (the
command prints both).  PPO runs play the deterministic policy (mean action, most
likely choice) of ``--params`` on the ``PPO_TEST`` stream, as ``synapto ppo-eval``
does.  Frames come from the env's ``rgb_array`` rendering (headless: SDL's dummy
drivers), every ``--every``-th step, scaled by ``--scale``; a white band above each
frame (never over the env's pixels) names the episode and its return so far, and the
last frame of an episode is held for a second with the final return.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from synapto.common.errors import RunFileError, UsageError
from synapto.common.seeding import Stream, int_seed, test_seeds
from synapto.envs import make_env, prepare_headless_render, render_failed, space_info
from synapto.policies import pick_genome
from synapto.ppo.config import PPOConfig
from synapto.ppo.normalise import normalise
from synapto.ppo.policy import Policy
from synapto.store import PPORun
from synapto.store.series import run_kind
from synapto.viz import check_image_out, require, write_output


@dataclass
class Player:
    """What plays: a name, the env, per-episode seeds, and reset/act callables."""

    title: str
    env_id: str
    seeds: list[int]
    reset: Callable[[], None]
    act: Callable[[np.ndarray], int | np.ndarray]  #: an int for Discrete spaces
    end: Callable[[], None]
    limit: int | None  #: step cap besides the env's own time limit
    expected: list[float]  #: the run file's returns of these episodes, when it has them
    discrete: bool
    make_kwargs: dict = field(default_factory=dict)  #: gymnasium.make's keyword arguments (env options)


def _evolve_player(path, generation, individual, episodes, max_steps) -> tuple[Player, str]:
    pick = pick_genome(path, generation, individual)
    cfg, agent = pick.config, pick.agent
    policy = agent.policy(pick.genome)
    seeds = [int(s) for s in test_seeds(cfg.seed, episodes)]
    expected = [float(r) for r in pick.test_returns[:episodes]]  # the champion's stored test returns
    title = f"{cfg.agent} {list(cfg.hidden)}, {pick.label}"
    return Player(
        title,
        cfg.env,
        seeds,
        policy.reset,
        pick.act(policy),
        policy.end_episode,
        max_steps,
        expected,
        agent.space.discrete,
        cfg.make_kwargs,
    ), pick.what


def _ppo_player(path, params, episodes, max_steps) -> tuple[Player, str]:
    with PPORun(path) as run:
        cfg = run.parse_config(PPOConfig.from_json)
        pi, _, label = run.params(params)
        dims = (run.obs_dim, run.act_dim, run.discrete)
        norm = run.policy_norm(int(label.split()[1]) if label.startswith("epoch ") else run.completed - 1)
        stored = run.policy_test() if label == "final" else None  # the final policy's test episodes
    info = space_info(cfg.env)
    if (info.obs_dim, info.act_dim, info.discrete) != dims:
        raise RunFileError(f"{str(path)!r}: the run's spaces {dims} do not match {cfg.env}'s")
    if not np.all(np.isfinite(pi)):
        raise RunFileError(f"{str(path)!r}: the {label} parameters are not written (NaN)")
    dtype = np.dtype(cfg.dtype)
    policy = Policy(info.obs_dim, info.act_dim, cfg.hid, info.discrete, pi.astype(dtype))
    limits = [x for x in (cfg.max_ep_len, max_steps) if x is not None]

    def act(obs):
        x = np.ravel(obs) if norm is None else normalise(np.ravel(obs), *norm)
        return policy.mode(x.astype(dtype))

    seeds = [int_seed(cfg.seed, Stream.PPO_TEST, e) for e in range(episodes)]
    title = f"PPO {list(cfg.hid)} ({label})"
    expected = [] if stored is None else [float(r) for r in stored["returns"][:episodes]]
    return Player(
        title, cfg.env, seeds, lambda: None, act, lambda: None, min(limits) if limits else None, expected, info.discrete
    ), f"PPO policy, parameters {label}"


def _font(ImageFont, size: int):
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1: a fixed bitmap font
        return ImageFont.load_default()


def render_run(
    path: Path,
    out: Path,
    generation: int | None = None,
    individual: int | None = None,
    episodes: int = 1,
    max_steps: int | None = None,
    every: int = 2,
    scale: float = 0.5,
    fps: float | None = None,
    params: str = "latest",
    log=print,
) -> dict:
    """Play ``episodes`` episodes and write the animation to ``out`` (.gif or .mp4)."""
    out = Path(out)
    suffix = _check_options(out, episodes, max_steps, every, scale, fps)
    require("imageio", "render")
    framer = _Framer(scale)
    write = _writer(suffix)

    prepare_headless_render()  # before any env of this process is made
    player, what = _player(path, generation, individual, params, episodes, max_steps)
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame draws off-screen, no display needed
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

    frames: list[np.ndarray] = []
    played: list[_Episode] = []
    render_fps = None
    for e, seed in enumerate(player.seeds):
        episode, env_fps = _play(player, framer, e, seed, every)
        render_fps = render_fps or env_fps
        frames += episode.frames
        played.append(episode)
        rate = fps or (render_fps / every if render_fps else 25.0)
        frames.extend([episode.last] * max(1, int(round(rate))))  # hold the end for about a second

    fps = fps or (render_fps / every if render_fps else 25.0)
    write_output(out, lambda path: write(path, frames, fps))
    _log_episodes(player, played, log)
    returns = [ep.total for ep in played]
    size = out.stat().st_size
    h, w = frames[0].shape[:2]
    log(
        f"render: {what} on {player.env_id}, {len(returns)} episode(s), {len(frames)} frames "
        f"{w}x{h} at {fps:g} fps -> {out} ({size / 1e6:.2f} MB)"
    )
    return {
        "returns": returns,
        "lengths": [ep.steps for ep in played],
        "frames": len(frames),
        "width": w,
        "height": h,
        "fps": fps,
    }


def _check_options(out: Path, episodes: int, max_steps: int | None, every: int, scale: float, fps: float | None) -> str:
    """Refuse bad options in one line each; ``out``'s suffix."""
    suffix = check_image_out(out, (".gif", ".mp4"))
    if episodes < 1:
        raise UsageError(f"--episodes must be an integer >= 1, got {episodes}")
    if max_steps is not None and max_steps < 1:
        raise UsageError(f"--max-steps must be an integer >= 1, got {max_steps}")
    if every < 1:
        raise UsageError(f"--every must be an integer >= 1, got {every}")
    if not 0.05 <= scale <= 4:
        raise UsageError(f"--scale must be between 0.05 and 4, got {scale}")
    if fps is not None and not 0.5 <= fps <= 100:
        raise UsageError(f"--fps must be between 0.5 and 100, got {fps}")
    return suffix


def _player(
    path: Path, generation: int | None, individual: int | None, params: str, episodes: int, max_steps: int | None
) -> tuple[Player, str]:
    """The run's player (evolution or PPO, by the run file's kind) and what it plays, in words."""
    if run_kind(path) == "evolve":
        if params != "latest":
            raise UsageError("--params is for PPO runs; evolution runs take --generation/--individual")
        return _evolve_player(path, generation, individual, episodes, max_steps)
    if generation is not None or individual is not None:
        raise UsageError("--generation/--individual are for evolution runs; PPO runs take --params")
    return _ppo_player(path, params, episodes, max_steps)


class _Framer:
    """An env's current frame as an animation frame: rendered, scaled, cropped to even sizes,
    below a caption."""

    def __init__(self, scale: float):
        self.Image = require("PIL.Image", "render", "pillow")
        self.ImageDraw = require("PIL.ImageDraw", "render", "pillow")
        self.ImageFont = require("PIL.ImageFont", "render", "pillow")
        self.scale = scale
        self.fonts: dict = {}

    def grab(self, env, env_id: str, lines: list[str]) -> np.ndarray:
        """The env's current frame, scaled, with ``lines`` written at its top."""
        try:
            img = env.render()
        except Exception as exc:  # no OpenGL context (MuJoCo without EGL/OSMesa), ...
            raise render_failed(env_id, exc) from None
        if img is None:
            raise UsageError(f"{env_id} returned no rgb_array frame; it cannot be rendered")
        Image, scale = self.Image, self.scale
        im = Image.fromarray(np.asarray(img, dtype=np.uint8))
        if scale != 1:
            im = im.resize(
                (max(2, round(im.width * scale)), max(2, round(im.height * scale))), Image.Resampling.BILINEAR
            )
        im = im.crop((0, 0, im.width - im.width % 2, im.height - im.height % 2))  # even sizes for video
        size = max(9, im.height // 18)
        if size not in self.fonts:
            self.fonts[size] = _font(self.ImageFont, size)
        return np.asarray(_captioned(Image, self.ImageDraw, im, lines, self.fonts[size]))


@dataclass
class _Episode:
    """One played episode: its frames (the held last one apart), return, length and how it ended."""

    frames: list
    last: np.ndarray
    total: float
    steps: int
    end: str


def _play(player: Player, framer: _Framer, e: int, seed: int, every: int) -> tuple[_Episode, float | None]:
    """Episode ``e`` from ``seed`` in a fresh env, a frame every ``every`` steps; with the env's
    ``render_fps`` (None if it names none)."""
    try:
        env = make_env(player.env_id, render_mode="rgb_array", **player.make_kwargs)
    except UsageError:
        raise
    except Exception as exc:
        raise render_failed(player.env_id, exc) from None
    env_fps = (env.metadata or {}).get("render_fps")
    obs, _ = env.reset(seed=seed)
    player.reset()
    total, t, end = 0.0, 0, "time limit"
    n = len(player.seeds)
    frames = [framer.grab(env, player.env_id, [player.title, f"episode {e + 1}/{n}  step 0  return 0.0"])]
    while True:
        action = player.act(obs)
        if not player.discrete and not np.all(np.isfinite(action)):
            end = "non-finite action"
            break
        obs, reward, terminated, truncated, _ = env.step(action)
        total += float(reward)
        t += 1
        if terminated or truncated or (player.limit is not None and t >= player.limit):
            end = "terminated" if terminated else ("time limit" if truncated else f"stopped at {t} steps")
            break
        if t % every == 0:
            frames.append(
                framer.grab(env, player.env_id, [player.title, f"episode {e + 1}/{n}  step {t}  return {total:.1f}"])
            )
    player.end()
    last = framer.grab(env, player.env_id, [player.title, f"episode {e + 1}/{n}  return {total:.1f}  ({end})"])
    env.close()
    return _Episode(frames, last, total, t, end), env_fps


def _log_episodes(player: Player, played: list[_Episode], log) -> None:
    """One line per episode: its return, length and end, beside the run file's test return."""
    for e, ep in enumerate(played):
        note = ""
        if e < len(player.expected):
            stored = player.expected[e]
            same = ep.total == stored  # the same episode, step for step: bit-identical
            note = f"; run file's test return {stored:.2f}" + (
                ""
                if same
                else " (differs: the episode was cut short)"
                if ep.end.startswith("stopped")
                else " (DIFFERS)"
            )
        log(f"episode {e + 1} (seed {player.seeds[e]}): return {ep.total:.2f} in {ep.steps} steps, {ep.end}{note}")


def _captioned(Image, ImageDraw, frame, lines, font):
    """``frame`` below a white band holding ``lines``: the caption never hides the env's
    pixels.  The band's height depends on the font only, so every frame has one size."""
    pad = 3
    top, bottom = ImageDraw.Draw(frame).textbbox((0, 0), "Ag", font=font)[1::2]
    line_height = bottom - top
    band = len(lines) * (line_height + pad) + pad
    band += band % 2  # even sizes for video
    out = Image.new("RGB", (frame.width, frame.height + band), (255, 255, 255))
    out.paste(frame.convert("RGB"), (0, band))
    draw = ImageDraw.Draw(out)
    y = pad
    for line in lines:
        b = draw.textbbox((0, 0), line, font=font)
        draw.text((pad, y - b[1]), line, fill=(0, 0, 0), font=font)
        y += line_height + pad
    return out


def _writer(suffix: str):
    """A function ``write(path, frames, fps)`` for ``suffix``; checked before any episode runs."""
    if suffix == ".gif":
        iio = require("imageio.v3", "render", "imageio")

        def write_gif(path, frames, fps):
            iio.imwrite(path, np.stack(frames), extension=".gif", duration=max(20, int(round(1000 / fps))), loop=0)

        return write_gif
    try:
        import av  # noqa: F401

        iio = require("imageio.v3", "render", "imageio")

        def write_pyav(path, frames, fps):
            iio.imwrite(path, np.stack(frames), plugin="pyav", codec="libx264", fps=fps)

        return write_pyav
    except ImportError:
        pass
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        raise UsageError(
            "writing .mp4 needs ffmpeg for imageio: pip install imageio-ffmpeg (or av); .gif works without it"
        ) from None
    imageio = require("imageio", "render")

    def write_ffmpeg(path, frames, fps):
        imageio.v2.mimwrite(path, frames, format="FFMPEG", fps=fps, macro_block_size=2)

    return write_ffmpeg

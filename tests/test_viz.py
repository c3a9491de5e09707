"""plot, render, draw and export on tiny run files made here (CartPole, a few generations)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import ROOT, _env, run_cli

if os.environ.get("SYNAPTO_REQUIRE_EXTRAS"):  # `make test`: the plot extra is installed, its absence an error
    import imageio  # noqa: F401
    import matplotlib
    from PIL import Image
else:
    pytest.importorskip("matplotlib")
    pytest.importorskip("imageio")
    Image = pytest.importorskip("PIL.Image")

import matplotlib

from synapto.common.errors import UsageError

TINY = ["--env", "CartPole-v1", "--population", "6", "--episodes", "1", "--test-episodes", "2", "--hidden", "3"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two seeds of one hebbian-dag config, a pruned-mlp run, a PPO run (made concurrently)."""
    d = tmp_path_factory.mktemp("viz_runs")
    cmds = [
        ["evolve", *TINY, "--strategy", "ga", "--generations", "3", "--seed", "1", "2", "--out", d / "dag.h5"],
        [
            "evolve",
            *TINY,
            "--agent",
            "pruned-mlp",
            "--strategy",
            "ga",
            "--generations",
            "2",
            "--seed",
            "3",
            "--out",
            d / "mlp.h5",
        ],
        [
            "ppo",
            "--env",
            "CartPole-v1",
            "--epochs",
            "2",
            "--steps-per-epoch",
            "200",
            "--hid",
            "4",
            "--out",
            d / "ppo.h5",
        ],
        [
            "evolve",
            *TINY,
            "--agent",
            "pruned-mlp",
            "--strategy",
            "openai-es",
            "--prune",
            "off",
            "--generations",
            "2",
            "--seed",
            "4",
            "--out",
            d / "es.h5",
        ],
    ]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "synapto", *map(str, c)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
            cwd=ROOT,
        )
        for c in cmds
    ]
    for p, c in zip(procs, cmds):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, f"{c}\n{out}\n{err}"
    return {
        "dag1": d / "dag_s1.h5",
        "dag2": d / "dag_s2.h5",
        "mlp": d / "mlp.h5",
        "ppo": d / "ppo.h5",
        "es": d / "es.h5",
        "dir": d,
    }


def assert_png(path: Path, width: int, height: int) -> np.ndarray:
    with Image.open(path) as im:
        assert im.format == "PNG"
        assert im.size == (width, height)
        pixels = np.asarray(im.convert("RGB")).astype(int)
    assert_not_blank(pixels)
    return pixels


def assert_not_blank(pixels: np.ndarray) -> None:
    non_white = np.any(pixels < 240, axis=-1).mean()
    assert 0.01 < non_white < 0.95, f"fraction of non-white pixels {non_white:.3f}"
    assert len(np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)) > 8  # more than a few flat colours


def quiet(*_):
    pass


# --------------------------------------------------------------------------------- plot
def test_plot_evolution_and_ppo_on_two_axes(runs, tmp_path):
    from synapto.viz.plot import plot_runs

    out = plot_runs(
        [runs["dag1"], runs["dag2"], runs["mlp"], runs["ppo"]],
        tmp_path / "curves.png",
        axes=["env-steps,wall-time"],
        width=900,
        height=600,
        log=quiet,
    )
    pixels = assert_png(out, 900, 600)
    # the colours of the three groups (C0 blue, C1 orange, C2 green) all appear
    for rgb in ((31, 119, 180), (255, 127, 14), (44, 160, 44)):
        assert np.any(np.all(np.abs(pixels - rgb) < 8, axis=-1)), rgb


@pytest.mark.parametrize("width", [420, 900])
def test_plot_legend_stays_inside_the_figure_with_a_colour_per_line(runs, width):
    from synapto.store.series import read_run
    from synapto.viz.plot import curves_figure

    fig, _ = curves_figure(
        [read_run(runs[k]) for k in ("dag1", "dag2", "mlp", "ppo")], ["generation"], width=width, height=520
    )
    fig.canvas.draw()
    (legend,) = fig.legends
    box, frame = legend.get_window_extent(), fig.bbox
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1, (box, frame)
    for ax in fig.axes:  # and it covers no panel
        assert not box.overlaps(ax.get_window_extent())
    colours = [tuple(np.round(matplotlib.colors.to_rgba(h.get_color()), 3)) for h in legend.legend_handles]
    assert len(colours) == len(set(colours)) == 9  # 2 groups x 4 curves + PPO: every line its own colour


def test_plot_panels_only_for_what_the_runs_have(runs):
    from synapto.store.series import read_run
    from synapto.viz.plot import curves_figure

    fig, _ = curves_figure([read_run(runs["es"])], ["generation"])  # openai-es, --prune off: nothing pruned
    assert len(fig.axes) == 1
    fig, _ = curves_figure([read_run(runs["dag1"])], ["generation"])  # the GA prunes: connections panel
    assert len(fig.axes) == 2
    fig, _ = curves_figure([read_run(runs["ppo"])], ["generation"])
    (ax,) = fig.axes
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks  # whole epochs


def test_plot_of_two_envs_gives_each_its_own_y_axis(runs, tmp_path):
    from synapto.store.series import read_run
    from synapto.viz.plot import curves_figure

    other = read_run(runs["mlp"])
    other.config = {**other.config, "env": "Acrobot-v1"}  # the same data, said to be of another env
    fig, _ = curves_figure([read_run(runs["dag1"]), other], ["generation"], connections=False)
    titles = sorted(ax.get_title() for ax in fig.axes)
    assert titles == ["Acrobot-v1", "CartPole-v1"]
    a, _b = fig.axes
    assert a.get_shared_y_axes().get_siblings(a) == [a]  # y axes not shared


def test_plot_svg_and_generation_axis(runs, tmp_path):
    from synapto.viz.plot import plot_runs

    out = plot_runs(
        [runs["dag1"], runs["dag2"]],
        tmp_path / "curves.svg",
        axes=["generation"],
        band="std",
        width=640,
        height=480,
        log=quiet,
    )
    root = ET.parse(out).getroot()
    assert root.tag.endswith("svg")
    assert root.attrib["width"] == "460.8pt" and root.attrib["height"] == "345.6pt"  # 640x480 px at 100 dpi
    assert len(root.findall(".//{http://www.w3.org/2000/svg}path")) > 20


def test_plot_legend_names_runs_by_their_files_or_their_labels(runs, tmp_path, capsys):
    """Runs of different configs: each group is named after its run files (a shipped config's
    name: evolve --config NAME writes runs/NAME.h5), not by the options that differ;
    --label names each run, and runs with one label are one group."""
    from synapto.cli import main
    from synapto.store.series import read_run
    from synapto.viz.plot import curves_figure

    data = [read_run(runs[k]) for k in ("dag1", "dag2", "mlp", "es")]
    fig, groups = curves_figure(data, ["generation"])
    assert [g.label for g in groups] == [
        "dag (hebbian-dag [3], 2 seeds)",
        "mlp (pruned-mlp [3], seed 3)",
        "es (pruned-mlp [3], seed 4)",
    ]
    (legend,) = fig.legends
    texts = [t.get_text().replace("\n", " ") for t in legend.get_texts()]
    assert "dag (hebbian-dag [3], 2 seeds): best fitness" in texts and all(len(t) < 60 for t in texts), texts
    fig, groups = curves_figure(data, ["generation"], labels=["GA", "GA", "GA mlp", "ES"])
    assert [(g.label, len(g.runs)) for g in groups] == [("GA", 2), ("GA mlp", 1), ("ES", 1)]
    assert "ES: pop-mean fitness" in [t.get_text() for t in fig.legends[0].get_texts()]
    with pytest.raises(SystemExit) as exc:
        main(["plot", runs["dag1"], runs["es"], "--label", "one", "--out", tmp_path / "p.png"])
    assert exc.value.code == 2 and not (tmp_path / "p.png").exists()
    assert capsys.readouterr().err == "error: --label is given 1 time(s) for 2 run file(s): give one per run file\n"


def test_grouping_of_seeds(runs):
    from synapto.store.series import read_run
    from synapto.viz.plot import aggregate, group_runs

    data = [read_run(runs[k]) for k in ("dag1", "mlp", "dag2", "ppo")]
    groups = group_runs(data)
    assert [len(g.runs) for g in groups] == [2, 1, 1]
    assert sorted(r.seed for r in groups[0].runs) == [1, 2]
    assert "hebbian-dag [3]" in groups[0].label and "2 seeds" in groups[0].label
    assert "pruned-mlp [3]" in groups[1].label and "seed 3" in groups[1].label
    assert groups[2].kind == "ppo" and groups[2].label == "ppo (PPO [4], seed 0)"
    # mean and band over the two seeds
    a, b = groups[0].runs
    for axis in ("generation", "env-steps", "wall-time"):
        x, mean, low, high = aggregate([a.x[axis], b.x[axis]], [a.curves["best"], b.curves["best"]], axis, "minmax")
        assert len(x) == len(mean) == len(low) == len(high) > 0
        ok = np.isfinite(mean)  # on a time axis, a gap between the seeds' ranges has no value
        assert ok.sum() > len(x) // 2 and np.array_equal(ok, np.isfinite(low) & np.isfinite(high))
        assert np.all(low[ok] <= mean[ok] + 1e-9) and np.all(mean[ok] <= high[ok] + 1e-9)
    x, mean, low, high = aggregate(
        [a.x["generation"], b.x["generation"]], [a.curves["pop-mean"], b.curves["pop-mean"]], "generation", "std"
    )
    np.testing.assert_allclose(mean, (a.curves["pop-mean"] + b.curves["pop-mean"]) / 2)
    np.testing.assert_allclose(high - mean, np.abs(a.curves["pop-mean"] - b.curves["pop-mean"]) / 2)


def test_readers_trust_completed(runs, tmp_path):
    """A run cut after generation 2 of 3: plot/export read 2 rows; render/draw take the best so far."""
    from synapto.policies import pick_genome
    from synapto.store.series import read_run

    cut = tmp_path / "cut.h5"
    shutil.copy(runs["dag1"], cut)
    with h5py.File(cut, "r+") as f:
        f["completed"][0] = 2
        f["champion/tested"][0] = 0
        fit = f["fitness"][:2]
        f["fitness"][2, 0] = 1e9  # a row past /completed must be ignored
    run = read_run(cut)
    assert run.rows == 2 and len(run.curves["best"]) == 2 and not run.finished
    pick = pick_genome(cut)
    g, i = np.unravel_index(np.argmax(fit), fit.shape)
    assert (pick.generation, pick.individual) == (g, i) and "best so far" in pick.what
    # killed in the champion test, with its checkpoint beside it: the run's own best-ever agent is taken
    shutil.copy(runs["dag1"], cut)
    with h5py.File(cut, "r+") as f:
        f["champion/tested"][0] = 0
    shutil.copy(str(runs["dag1"]) + ".ckpt", str(cut) + ".ckpt")
    pick = pick_genome(cut)
    with h5py.File(runs["dag1"], "r") as f:
        assert np.array_equal(pick.genome, f["champion/genome"][()])
        assert pick.generation == f["champion/generation"][0] and "best so far" in pick.label


def test_wall_time_missing_falls_back(runs, tmp_path, capsys):
    from synapto.viz.plot import plot_runs

    bare = tmp_path / "ppo_bare.h5"
    shutil.copy(runs["ppo"], bare)
    with h5py.File(bare, "r+") as f:
        del f["timing"]
    out = plot_runs([runs["dag1"], bare], tmp_path / "w.png", axes=["wall-time"], log=quiet)
    assert out.exists() and "no wall-clock timing" in capsys.readouterr().err
    plot_runs([bare], tmp_path / "e.png", axes=["env-steps"], log=quiet)  # other axes still work
    with pytest.raises(UsageError, match="wall-clock"):
        plot_runs([bare], tmp_path / "w2.png", axes=["wall-time"], log=quiet)


# ---------------------------------------------------------------------------- render
def test_render_champion_gif_reproduces_test_returns(runs, tmp_path):
    from synapto.viz.render import render_run

    lines = []
    info = render_run(runs["dag1"], tmp_path / "champion.gif", episodes=2, every=3, scale=0.25, log=lines.append)
    frames = np.asarray(__import__("imageio.v3", fromlist=["imread"]).imread(tmp_path / "champion.gif", index=None))
    # a 600x400 CartPole frame at a quarter, below a caption band
    assert frames.ndim == 4 and frames.shape[2] == 150 and frames.shape[1] > 100 and frames.shape[0] > 2
    assert_not_blank(frames[0][..., :3].astype(int))
    assert np.any(frames[0] != frames[-1])  # it moves
    with h5py.File(runs["dag1"], "r") as f:
        stored = f["champion/test_returns"][:2]
    assert info["returns"] == list(stored)
    assert sum("run file's test return" in line for line in lines) == 2
    assert not any("DIFFERS" in line for line in lines)


def test_gif_caption_is_outside_the_env_pixels_and_the_first_frame_shows_the_lander(tmp_path):
    """The caption band sits above the env's frame: the first frame's lower part is the env's own
    picture at reset (the lander at the top of the screen included), up to the GIF's palette."""
    from synapto.common.seeding import test_seeds
    from synapto.envs import make_env
    from synapto.viz.render import render_run

    run = tmp_path / "lunar.h5"
    proc = run_cli(
        "evolve",
        "--env",
        "LunarLander-v3",
        "--agent",
        "pruned-mlp",
        "--hidden",
        "2",
        "--population",
        "4",
        "--generations",
        "1",
        "--episodes",
        "1",
        "--validate-episodes",
        "0",
        "--test-episodes",
        "1",
        "--seed",
        "5",
        "--out",
        run,
        "-q",
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    render_run(run, tmp_path / "l.gif", max_steps=2, scale=0.5, log=quiet)
    first = np.asarray(__import__("imageio.v3", fromlist=["imread"]).imread(tmp_path / "l.gif", index=0))[..., :3]
    env = make_env("LunarLander-v3", render_mode="rgb_array")
    env.reset(seed=int(test_seeds(5, 1)[0]))
    im = Image.fromarray(env.render())
    env.close()
    im = im.resize((round(im.width * 0.5), round(im.height * 0.5)), Image.Resampling.BILINEAR)
    expected = np.asarray(im)[: im.height - im.height % 2, : im.width - im.width % 2].astype(int)
    h = expected.shape[0]
    assert first.shape[0] > h and first.shape[1] == expected.shape[1]
    below = first[-h:].astype(int)
    assert np.abs(below - expected).mean() < 4  # the env's pixels, untouched by the caption
    lander = (expected[..., 2] > 180) & (expected[..., 0] < 180) & (expected[..., 1] < 160)  # its purple body
    top = slice(0, h // 3)
    assert lander[top].sum() > 20 and ((below[..., 2] > 180) & (below[..., 0] < 180))[top].sum() > 20
    assert np.all(first[: first.shape[0] - h].mean(axis=(1, 2)) > 150)  # the band: white with black text


def test_render_individual_and_ppo(runs, tmp_path):
    from synapto.viz.render import render_run

    a = render_run(runs["mlp"], tmp_path / "i.gif", generation=1, individual=4, max_steps=20, scale=0.2, log=quiet)
    assert max(a["lengths"]) <= 20 and a["width"] == 120 and a["height"] > 80
    render_run(runs["mlp"], tmp_path / "j.gif", generation=1, individual=4, max_steps=20, scale=0.2, log=quiet)
    assert (tmp_path / "i.gif").read_bytes() == (tmp_path / "j.gif").read_bytes()  # reproducible
    b = render_run(runs["ppo"], tmp_path / "p.gif", max_steps=15, scale=0.2, log=quiet)
    assert b["lengths"][0] <= 15 and (tmp_path / "p.gif").stat().st_size > 1000
    with pytest.raises(UsageError, match="--generation"):
        render_run(runs["ppo"], tmp_path / "x.gif", generation=0, individual=0, log=quiet)
    with pytest.raises(UsageError, match="out of range"):
        render_run(runs["mlp"], tmp_path / "x.gif", generation=5, individual=0, log=quiet)
    with pytest.raises(UsageError, match="both"):
        render_run(runs["mlp"], tmp_path / "x.gif", generation=1, log=quiet)


def test_render_mp4_writes_or_names_the_missing_writer(runs, tmp_path):
    import importlib.util

    from synapto.viz.render import render_run

    have_writer = any(importlib.util.find_spec(m) is not None for m in ("av", "imageio_ffmpeg"))
    if have_writer:
        render_run(runs["dag1"], tmp_path / "c.mp4", max_steps=30, scale=0.25, log=quiet)
        assert (tmp_path / "c.mp4").stat().st_size > 1000
    else:
        with pytest.raises(UsageError, match="imageio-ffmpeg"):
            render_run(runs["dag1"], tmp_path / "c.mp4", max_steps=30, scale=0.25, log=quiet)


# ------------------------------------------------------------------------------ draw
def test_draw_hebbian_dag_with_activity(runs, tmp_path):
    from synapto.viz.draw import draw_run

    info = draw_run(runs["dag2"], tmp_path / "net.png", width=1000, height=500, log=quiet)
    assert info["panels"] == 2
    assert_png(tmp_path / "net.png", 1000, 500)
    with h5py.File(runs["dag2"], "r") as f:
        assert info["connections"] == np.count_nonzero(f["champion/genome"][()])


def test_draw_pruned_mlp_svg(runs, tmp_path):
    from synapto.policies import pick_genome
    from synapto.viz.draw import draw_run, network

    info = draw_run(runs["mlp"], tmp_path / "net.svg", log=quiet)
    assert info["panels"] == 1
    root = ET.parse(tmp_path / "net.svg").getroot()
    assert root.tag.endswith("svg")
    pick = pick_genome(runs["mlp"])
    net = network(pick.agent, pick.genome)
    assert len(net.weight) == info["connections"] == np.count_nonzero(pick.genome)
    # every edge points from a layer to the next, at the genome position of its weight
    assert np.all(net.dst_layer == net.src_layer + 1)
    assert np.all(pick.genome[net.index] == net.weight) and np.all(net.weight != 0)


def test_draw_of_a_linear_policy_names_it_linear(tmp_path):
    """A pruned-mlp without hidden layers (experiments/bipedal_sparse.toml's): every edge runs
    from an input to an output, and the title and log say linear rather than '0 of 0 hidden
    units'."""
    from synapto.policies import pick_genome
    from synapto.viz.draw import draw_run, network

    run = tmp_path / "lin.h5"
    args = [*TINY[:-2], "--hidden", "0", "--agent", "pruned-mlp", "--strategy", "ga", "--generations", "2"]
    proc = run_cli("evolve", *args, "--seed", "3", "--out", run, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines: list[str] = []
    info = draw_run(run, tmp_path / "net.png", log=lines.append)
    pick = pick_genome(run)
    net = network(pick.agent, pick.genome)
    assert pick.genome.size == 4 * 2 and info["connections"] == np.count_nonzero(pick.genome) == len(net.weight)
    assert np.all(net.src_layer == 0) and np.all(net.dst_layer == 1)
    assert "linear, no hidden units" in lines[-1] and "hidden units in use" not in lines[-1]


def test_network_of_hebbian_dag_matches_its_matrices(runs):
    from synapto.policies import pick_genome
    from synapto.viz.draw import network

    pick = pick_genome(runs["dag1"])
    agent, genome = pick.agent, pick.genome
    net = network(agent, genome)
    assert net.sizes == agent.sizes and len(net.weight) == np.count_nonzero(genome)
    for sl, su, dl, du, k in zip(net.src_layer, net.src_unit, net.dst_layer, net.dst_unit, net.index):
        w = genome[agent._slices[dl - 1]].reshape(agent._shapes[dl - 1])
        assert w[agent._cum[sl] + su, du] == genome[k] != 0


def test_a_sparse_network_is_drawn_without_its_dead_ends():
    """pruned-mlp 8-3-4 on LunarLander's names, by hand: x0 -> h0 -> main engine is the one
    path; h1 receives (x1) but sends nothing, h2 sends (to left engine) but receives
    nothing.  The drawing keeps h0 only, with its two edges; --all-units keeps all three
    hidden units and dashes the two edges that cannot change an action."""
    from synapto.agents.pruned_mlp import PrunedMLP
    from synapto.envs import SpaceInfo
    from synapto.viz.draw import network, view

    agent = PrunedMLP(SpaceInfo(obs_dim=8, act_dim=4, discrete=True, low=None, high=None, max_episode_steps=1000), (3,))
    genome = np.zeros(agent.n_params)
    w1, w2 = genome[:24].reshape(8, 3), genome[24:].reshape(3, 4)  # views
    w1[0, 0], w1[1, 1], w2[0, 2], w2[2, 1] = 0.7, -0.4, 1.5, 0.9
    net = network(agent, genome)
    v = view(net, "LunarLander-v3")
    assert v.rows[1].tolist() == [0] and v.left_out == 2
    drawn = {(int(net.src_unit[e]), int(net.dst_unit[e]), int(net.dst_layer[e])) for e in v.edges}
    assert drawn == {(0, 0, 1), (0, 2, 2)} and not v.inert.any()
    assert v.labels[0][:2] == ["x", "y"] and v.labels[2] == ["nothing", "left engine", "main engine", "right engine"]
    assert v.used[0].tolist() == [True] + [False] * 7
    full = view(net, "LunarLander-v3", all_units=True)
    assert sorted(full.rows[1].tolist()) == [0, 1, 2] and full.left_out == 0
    inert = {(int(net.src_layer[e]), int(net.src_unit[e])) for e, i in zip(full.edges, full.inert) if i}
    assert inert == {(0, 1), (1, 2)}  # x1 -> h1 and h2 -> left engine


# ----------------------------------------------------------------------------- export
def test_export_csv(runs, tmp_path):
    import csv

    from synapto.viz.export import export_runs

    files = export_runs([runs["dag1"], runs["ppo"]], tmp_path / "csv", log=quiet)
    names = sorted(p.name for p in files)
    assert names == ["dag_s1.csv", "dag_s1_champion.csv", "ppo.csv"]
    with open(tmp_path / "csv" / "dag_s1.csv") as fh:
        rows = list(csv.DictReader(fh))
    with h5py.File(runs["dag1"], "r") as f:
        assert len(rows) == int(f["completed"][0]) == 3
        assert [float(r["best_fitness"]) for r in rows] == list(f["stats/best_fitness"][:3])
        assert [r["generation"] for r in rows] == ["0", "1", "2"]
        np.testing.assert_allclose([float(r["wall_time"]) for r in rows], np.cumsum(f["timing/wall"][:3]))
    with open(tmp_path / "csv" / "ppo.csv") as fh:
        ppo = list(csv.DictReader(fh))
    assert len(ppo) == 2 and list(ppo[0])[:5] == ["Epoch", "AverageEpRet", "StdEpRet", "MaxEpRet", "MinEpRet"]
    assert [r["TotalEnvInteracts"] for r in ppo] == ["200", "400"] and "Time" in ppo[0]


# ------------------------------------------------------------------ command line, bad input
def assert_usage_error(proc, *needles):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_cli_makes_pictures(runs, tmp_path):
    out = tmp_path / "cli.png"
    proc = run_cli(
        "plot",
        runs["dag1"],
        runs["dag2"],
        runs["ppo"],
        "--out",
        out,
        "--x",
        "env-steps",
        "--x",
        "wall-time",
        "--width",
        "800",
        "--height",
        "500",
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert_png(out, 800, 500)
    proc = run_cli("export", runs["mlp"], "--csv", tmp_path / "c", timeout=120)
    assert proc.returncode == 0 and (tmp_path / "c" / "mlp.csv").exists(), proc.stderr


@pytest.fixture(scope="module")
def not_runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("not_runs")
    (d / "text.h5").write_text("not hdf5\n")
    with h5py.File(d / "other.h5", "w") as f:
        f["x"] = np.arange(3)
    return d


@pytest.mark.parametrize("command", ["plot", "render", "draw", "export"])
@pytest.mark.parametrize(
    "target, needle",
    [("missing.h5", "no such file"), ("text.h5", "not a readable HDF5"), ("other.h5", "not a synapto run")],
)
def test_bad_files_in_process(command, target, needle, not_runs, tmp_path, capsys):
    from synapto.cli import main

    new = tmp_path / "new"
    out = {
        "plot": ["--out", new / "p.png"],
        "render": ["--out", new / "r.gif"],
        "draw": ["--out", new / "d.png"],
        "export": ["--csv", new / "csv"],
    }[command]
    with pytest.raises(SystemExit) as exc:
        main([command, str(not_runs / target), *map(str, out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0], err
    assert not list(tmp_path.iterdir())  # nothing written, no folder created


@pytest.mark.parametrize(
    "args, needle",
    [
        (["plot", "{dag1}", "--x", "time", "--out", "{tmp}/a.png"], "--x 'time' is not an axis"),
        (["plot", "{dag1}", "--out", "{tmp}/a.jpg"], ".png or .svg"),
        (["plot", "{dag1}", "--band", "iqr", "--out", "{tmp}/a.png"], "--band"),
        (["plot", "{dag1}", "--curves", "worst", "--out", "{tmp}/a.png"], "worst"),
        (["render", "{dag1}", "--out", "{tmp}/a.avi"], ".gif or .mp4"),
        (["render", "{dag1}", "--episodes", "0", "--out", "{tmp}/a.gif"], "--episodes"),
        (["render", "{dag1}", "--generation", "99", "--individual", "0", "--out", "{tmp}/a.gif"], "out of range"),
        (["draw", "{ppo}", "--out", "{tmp}/a.png"], "PPO run"),
    ],
)
def test_bad_options_in_process(args, needle, runs, tmp_path, capsys):
    from synapto.cli import main

    argv = [a.format(dag1=runs["dag1"], ppo=runs["ppo"], tmp=tmp_path) for a in args]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0], err


def test_bad_input_through_the_real_cli(runs, not_runs, tmp_path):
    assert_usage_error(run_cli("plot", tmp_path / "none.h5", "--out", tmp_path / "a.png", timeout=60), "no such file")
    assert_usage_error(
        run_cli("plot", runs["dag1"], "--x", "steps", "--out", tmp_path / "a.png", timeout=60),
        "--x 'steps'",
        "env-steps",
    )
    assert_usage_error(
        run_cli("render", not_runs / "other.h5", "--out", tmp_path / "a.gif", timeout=60), "not a synapto run"
    )
    assert not list(tmp_path.iterdir())


MISSING = """
import sys
sys.modules["matplotlib"] = sys.modules["imageio"] = None  # imports fail as if not installed
from synapto.cli import main
for argv in {argvs!r}:
    try:
        main(argv)
    except SystemExit as exc:
        print(argv[0], exc.code)
"""


def test_missing_plot_extra_says_what_to_install(runs, tmp_path):
    argvs = [
        ["plot", str(runs["dag1"]), "--out", str(tmp_path / "x.png")],
        ["draw", str(runs["dag1"]), "--out", str(tmp_path / "x.png")],
        ["render", str(runs["dag1"]), "--out", str(tmp_path / "x.gif")],
        ["export", str(runs["dag1"]), "--csv", str(tmp_path / "c")],
    ]  # needs neither
    proc = subprocess.run(
        [sys.executable, "-c", MISSING.format(argvs=argvs)],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=60,
    )
    codes = [line for line in proc.stdout.splitlines() if not line.startswith("export:")]
    assert codes == ["plot 2", "draw 2", "render 2", "export 0"], proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        f"error: {c} needs {m}: pip install 'synapto-evo[plot]' (in a checkout: make install)"
        for c, m in (("plot", "matplotlib"), ("draw", "matplotlib"), ("render", "imageio"))
    ]
    assert not (tmp_path / "x.png").exists() and (tmp_path / "c" / "dag_s1.csv").exists()

"""A policy as files other tools read: ONNX (``--onnx``) and named weight matrices (``--npz``).

Every policy :func:`synapto.load_policy` gives (a ``pruned-mlp`` or static ``hebbian-dag``
agent of an evolution run, a PPO policy) is a stack of dense layers, read off as a
:class:`Network`::

    x0      = raw observation (flattened), float64
    x0      = clip((x0 - obs_mean) / obs_std, -obs_clip, obs_clip)     (runs with obs_norm)
    input_i = x_i                          (input "previous": an MLP)
            | concat(x0, x1, ..., x_i)     (input "all": the DAG, every earlier layer, observation first)
    x_i+1   = act_i(input_i @ weight_i + bias_i)     act_i: tanh or identity; bias_i may be absent
    out     = x_L[:, output_start:]        (hebbian-dag: unit 0 is the modulation unit, not an action)
    action  = argmax(out)                          (head "argmax": Discrete)
            | tanh(out)                            (head "tanh")
            | lo + (tanh(out) + 1) / 2 * (hi - lo) (head "tanh-scaled": finite Box bounds other than [-1, 1])
            | out                                  (head "identity": PPO's Gaussian mean)

``dtype`` is the arithmetic of the layers (float64 for evolution, the run's ``--dtype`` for
PPO); normalisation is float64, then cast, as synapto does it.

**ONNX** (:func:`write_onnx`, the ``onnx`` extra): input ``obs`` (batch, obs_dim), the raw
observation, float32 (what deployment code feeds; ``obs_dtype="float64"`` for a float64
input), cast to float64 inside, so that the arithmetic is synapto's: an env whose observations
are float32 (Box2D, classic control) gets the very actions of :meth:`act`; one whose
observations are float64 (MuJoCo) gets those of its observations rounded to float32.  Output
``action``: (batch,) int64 for Discrete, (batch, act_dim) in ``dtype`` for Box -- the action
:meth:`act` gives.  Opset 17.

**npz** (:func:`write_npz`): ``layer<i>_weight`` (inputs, units), ``layer<i>_bias`` (units,) where
the layer has one, ``obs_mean`` and ``obs_std`` with obs_norm, ``action_low``/``action_high``
for a scaled head, and ``layout``: a JSON string with ``obs_dim``, ``act_dim``, ``dtype``,
``obs_clip``, ``output_start``, ``head`` and per layer ``input`` and ``activation``
(``json.loads(str(np.load(f)["layout"]))``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from synapto.common.errors import UsageError

OPSET = 17
#: the element types an ONNX model's ``obs`` input may have
OBS_DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class Layer:
    weight: np.ndarray  #: (inputs, units)
    bias: np.ndarray | None
    input: str  #: "previous" or "all"
    activation: str  #: "tanh" or "identity"


@dataclass(frozen=True)
class Network:
    """A policy's layers and its observation normalisation and action head (module docstring)."""

    obs_dim: int
    act_dim: int
    layers: tuple[Layer, ...]
    head: str  #: argmax, tanh, tanh-scaled or identity
    dtype: str = "float64"
    obs_norm: tuple[np.ndarray, np.ndarray] | None = None
    obs_clip: float = 0.0
    output_start: int = 0
    bounds: tuple[np.ndarray, np.ndarray] | None = None

    def layout(self) -> dict:
        return {
            "obs_dim": self.obs_dim,
            "act_dim": self.act_dim,
            "dtype": self.dtype,
            "obs_norm": self.obs_norm is not None,
            "obs_clip": self.obs_clip,
            "output_start": self.output_start,
            "head": self.head,
            "layers": [
                {
                    "input": layer.input,
                    "activation": layer.activation,
                    "shape": list(layer.weight.shape),
                    "bias": layer.bias is not None,
                }
                for layer in self.layers
            ],
        }


def write_npz(net: Network, path: str | Path) -> None:
    arrays: dict[str, Any] = {"layout": np.array(json.dumps(net.layout()))}
    for i, layer in enumerate(net.layers):
        arrays[f"layer{i}_weight"] = layer.weight
        if layer.bias is not None:
            arrays[f"layer{i}_bias"] = layer.bias
    if net.obs_norm is not None:
        arrays["obs_mean"], arrays["obs_std"] = (np.asarray(a, np.float64) for a in net.obs_norm)
    if net.bounds is not None:
        arrays["action_low"], arrays["action_high"] = net.bounds
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


def require_onnx():
    """The ``onnx`` package, or one line naming the extra that brings it."""
    try:
        import onnx
    except ImportError:
        raise UsageError(
            "ONNX export needs the onnx package: pip install 'synapto-evo[onnx]' (in a checkout: make install)"
        ) from None
    return onnx


class _Graph:
    """The initialisers and nodes of an ONNX graph, in the order they are made."""

    def __init__(self):
        from onnx import TensorProto, helper, numpy_helper

        self.helper, self.numpy_helper, self.inits, self.nodes = helper, numpy_helper, [], []
        self.types = {"float64": TensorProto.DOUBLE, "float32": TensorProto.FLOAT, "int64": TensorProto.INT64}

    def const(self, name: str, value, dtype) -> str:
        self.inits.append(self.numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def node(self, op: str, inputs: list, name: str, **attrs) -> str:
        self.nodes.append(self.helper.make_node(op, inputs, [name], name=name, **attrs))
        return name


def onnx_model(net: Network, obs_dtype: str = "float32"):
    """The ONNX model of ``net`` with an ``obs`` input of ``obs_dtype`` (see the module docstring)."""
    if obs_dtype not in OBS_DTYPES:
        raise UsageError(f"obs_dtype must be one of {', '.join(OBS_DTYPES)}, got {obs_dtype!r}")
    onnx = require_onnx()
    g = _Graph()
    helper = g.helper
    out_type = _head(g, net, _layers(g, net, _input(g, net, obs_dtype)))
    graph = helper.make_graph(
        g.nodes,
        "synapto_policy",
        [helper.make_tensor_value_info("obs", g.types[obs_dtype], ["batch", net.obs_dim])],
        [out_type],
        initializer=g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="synapto")
    model.ir_version = min(model.ir_version, 8)  # readable by older runtimes too
    onnx.checker.check_model(model)
    return model


def _input(g: _Graph, net: Network, obs_dtype: str) -> str:
    """The observation as the network reads it: float64, normalised, cast to its dtype."""
    x = "obs"
    if obs_dtype != "float64":  # the observation as synapto reads it: float64 (exact for float32)
        x = g.node("Cast", [x], "obs_float64", to=g.types["float64"])
    if net.obs_norm is not None:
        x = g.node("Sub", [x, g.const("obs_mean", net.obs_norm[0], np.float64)], "obs_centred")
        x = g.node("Div", [x, g.const("obs_std", net.obs_norm[1], np.float64)], "obs_scaled")
        x = g.node(
            "Clip",
            [x, g.const("obs_min", -net.obs_clip, np.float64), g.const("obs_max", net.obs_clip, np.float64)],
            "obs_normalised",
        )
    if net.dtype != "float64":
        x = g.node("Cast", [x], "obs_cast", to=g.types[net.dtype])
    return x


def _layers(g: _Graph, net: Network, x: str) -> str:
    """The layers on input ``x``, then the slice of the actions' outputs."""
    acts = [x]
    for i, layer in enumerate(net.layers):
        src = acts[-1] if layer.input == "previous" or len(acts) == 1 else g.node("Concat", acts, f"input{i}", axis=1)
        h = g.node("MatMul", [src, g.const(f"layer{i}_weight", layer.weight, net.dtype)], f"layer{i}_matmul")
        if layer.bias is not None:
            h = g.node("Add", [h, g.const(f"layer{i}_bias", layer.bias, net.dtype)], f"layer{i}_add")
        if layer.activation == "tanh":
            h = g.node("Tanh", [h], f"layer{i}_tanh")
        acts.append(h)
    out = acts[-1]
    if net.output_start:
        end = net.output_start + net.act_dim
        starts = g.const("out_start", [net.output_start], np.int64)
        out = g.node(
            "Slice",
            [out, starts, g.const("out_end", [end], np.int64), g.const("out_axis", [1], np.int64)],
            "actions_out",
        )
    return out


def _head(g: _Graph, net: Network, out: str):
    """The ``action`` output from the outputs ``out``; its value info."""
    if net.head == "argmax":
        g.node("ArgMax", [out], "action", axis=1, keepdims=0)
        return g.helper.make_tensor_value_info("action", g.types["int64"], ["batch"])
    if net.head in ("tanh", "tanh-scaled"):
        out = g.node("Tanh", [out], "action_tanh")
    if net.head == "tanh-scaled":
        if net.bounds is None:
            raise ValueError("a tanh-scaled head needs the action bounds")
        lo, hi = net.bounds
        out = g.node("Add", [out, g.const("one", 1.0, net.dtype)], "action_plus1")
        out = g.node("Mul", [out, g.const("half", 0.5, net.dtype)], "action_half")
        out = g.node("Mul", [out, g.const("action_span", hi - lo, net.dtype)], "action_span_mul")
        out = g.node("Add", [g.const("action_low", lo, net.dtype), out], "action_scaled")
    g.node("Identity", [out], "action")
    return g.helper.make_tensor_value_info("action", g.types[net.dtype], ["batch", net.act_dim])


def write_onnx(net: Network, path: str | Path, obs_dtype: str = "float32") -> None:
    model = onnx_model(net, obs_dtype)
    with open(path, "wb") as fh:
        fh.write(model.SerializeToString())

r"""LoRA adapters (Hu et al. 2021, arXiv 2106.09685) added to a built model by module surgery.

`apply(model, LoraConfig(...), rngs)` replaces every `layers.Dense` named by one of `targets` by
a `LoraDense`. As peft's `target_modules`, a pattern names the layers whose dotted path ends
with it, in whole parts, as a regular expression: "query" is every `...attention.query` (not
DeBERTa's `pos_query_proj`), "query(_proj)?" also DeBERTa's `query_proj`, and
"encoder[.].*[.]query" the encoder's alone.

    y = x W (+ b) + (alpha / rank) * dropout(x) A B

A LoraDense keeps the Dense's own `kernel` / `bias` variables under the same names, so base
checkpoints (T5X, HF, chartjax) map onto it unchanged, and adds `lora_a [in, rank]` (HF peft's
default: kaiming-uniform, i.e. U(-1/sqrt(in), 1/sqrt(in)); or normal(1/rank)) and
`lora_b [rank, out]` (zeros), so the adapted model starts as the base model exactly. Both carry
logical axes (the kernel's own, the rank replicated), so chartjax.sharding places them.

`merge(model)` folds `W + (alpha/rank) A B` back into plain Dense layers (in place): the result
has no adapters and converts / exports like any model. `strip(model)` drops the adapters unmerged
(the base model's shape, for loading pretrained base weights).

The adapters' dropout is off unless `set_dropout(model, True)`: Dense has no `deterministic`
argument, so the train step turns it on for its own merged copy of the model.

`LoraConfig.base_dtype` stores the frozen base kernels of the adapted layers, and of the Dense
layers `base_layers` names, in "bfloat16" or "int8" (models/quantize.py: QLoRA's idea, with an
int8 kernel and a per-output-channel scale); `merge` and `strip` give float32 kernels back.
"""

from __future__ import annotations

import dataclasses
import re

import jax
import jax.numpy as jnp
from flax import nnx

from chartjax.config_checks import ConfigError
from chartjax.models import quantize
from chartjax.models.layers import Dense

ADAPTERS = ("lora_a", "lora_b")  # the parameter names LoraDense adds
INITS = ("kaiming_uniform", "gaussian")
_SALT = 0x10A  # folds an int seed into a stream apart from the base model's initializers


@dataclasses.dataclass(frozen=True)
class LoraConfig:
    """rank r, alpha (the update is scaled by alpha / r), dropout on the adapter input, and
    `targets`: patterns of the Dense layers to adapt (HF peft's T5 / BERT default: query and
    value projections of every attention block)."""

    rank: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    targets: tuple[str, ...] = ("query(_proj)?", "value(_proj)?")
    init: str = "kaiming_uniform"
    # How the frozen base kernels are stored (models/quantize.py): those of the adapted layers,
    # and of the Dense layers `base_layers` names (patterns as `targets`, e.g.
    # "vision_tower[.].*"; they must stay frozen). float32: as trained, base_layers unused.
    base_dtype: str = "float32"
    base_layers: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "targets", _patterns(self.targets, "LoraConfig.targets"))
        object.__setattr__(
            self, "base_layers", _patterns(self.base_layers, "LoraConfig.base_layers")
        )
        if self.base_dtype not in quantize.BASE_DTYPES:
            raise ValueError(
                f"LoraConfig.base_dtype must be one of {quantize.BASE_DTYPES}, "
                f"not {self.base_dtype!r}"
            )
        if not (isinstance(self.rank, int) and self.rank > 0):
            raise ValueError(f"LoraConfig.rank must be a positive int, not {self.rank!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"LoraConfig.dropout must be in [0, 1), not {self.dropout!r}")
        if self.init not in INITS:
            raise ValueError(f"LoraConfig.init must be one of {INITS}, not {self.init!r}")
        if not self.targets:
            raise ValueError("LoraConfig.targets is empty: name the Dense layers to adapt")

    @property
    def scale(self) -> float:
        return self.alpha / self.rank


def _patterns(value, where: str) -> tuple[str, ...]:
    """A tuple of patterns (a lone string is one pattern, not its characters); bad regexes are
    refused naming them."""
    out = (value,) if isinstance(value, str) else tuple(value)
    for p in out:
        try:
            re.compile(p)
        except re.error as e:
            raise ValueError(f"{where}: bad pattern {p!r} ({e})") from None
    return out


def _uniform(bound: float):
    def init(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


class LoraDense(Dense):
    """A Dense with a low-rank update; see the module docstring. Built from a Dense only."""

    def __init__(self, base: Dense, cfg: LoraConfig, rngs: nnx.Rngs, keys=None):
        # No Dense.__init__: the base layer's variables are taken over as they are (the
        # kernel in cfg.base_dtype: int8 adds its `kernel_scale`).
        quantize.take_over(self, base, cfg.base_dtype)
        d_in, d_out = base.kernel.shape
        names = base.kernel.get_metadata().get("out_sharding") or (None, None)
        if cfg.init == "kaiming_uniform":  # torch's kaiming_uniform_(a=sqrt(5)), as peft
            init_a = _uniform(1.0 / d_in**0.5)
        else:
            init_a = jax.nn.initializers.normal(1.0 / cfg.rank)
        key_a, key_b = keys if keys is not None else (rngs.params(), rngs.params())
        self.lora_a = nnx.Param(
            nnx.with_partitioning(init_a, (names[0], None))(key_a, (d_in, cfg.rank), jnp.float32)
        )
        self.lora_b = nnx.Param(
            nnx.with_partitioning(jax.nn.initializers.zeros, (None, names[1]))(
                key_b, (cfg.rank, d_out), jnp.float32
            )
        )
        self.scale = cfg.scale
        self.lora_dropout = (
            nnx.Dropout(cfg.dropout, deterministic=True, rngs=rngs) if cfg.dropout else None
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        y = quantize.matmul(x, self)
        h = x if self.lora_dropout is None else self.lora_dropout(x)
        h = jnp.dot(h.astype(self.dtype), self.lora_a[...].astype(self.dtype))
        return y + self.scale * jnp.dot(h, self.lora_b[...].astype(self.dtype))

    def merged_kernel(self) -> jax.Array:
        """W + scale * A B in float32 (full-precision matmul: no TF32 on GPU); W dequantized
        or cast to float32 first when stored in a base dtype."""
        delta = jnp.dot(self.lora_a[...], self.lora_b[...], precision=jax.lax.Precision.HIGHEST)
        return quantize.float_kernel(self) + self.scale * delta

    def plain(self, merge: bool) -> Dense:
        """A float32 Dense holding this layer's kernel (W + scale A B when `merge`) and bias."""
        return quantize.plain(self, self.merged_kernel() if merge else None)


def dotted(path) -> str:
    return ".".join(str(p) for p in path)


def names_layer(pattern: str, path: str) -> bool:
    """Whether `pattern` matches a whole trailing run of the parts of the dotted `path`."""
    return re.fullmatch(rf"(?:.*\.)?(?:{pattern})", path) is not None


def _replace(model: nnx.Module, path: tuple, new: nnx.Module) -> None:
    parent = model
    for p in path[:-1]:
        parent = parent[p] if isinstance(p, int) else getattr(parent, p)
    if isinstance(path[-1], int):
        parent[path[-1]] = new
    else:
        setattr(parent, path[-1], new)


def _denses(model: nnx.Module, cls=Dense):
    return [
        (path, m)
        for path, m in nnx.iter_modules(model)
        if type(m) is cls  # LoraDense is a Dense too: never adapt one twice
    ]


def _draws(rngs: nnx.Rngs, n: int) -> list[jax.Array]:
    """The next `n` keys of the params stream, exactly as `n` calls of `rngs.params()` give them
    (fold_in(key, count + i)), the count advanced once. Inside a trace (eval_shape, the jitted
    init) each call costs time in proportion to the trace so far (Flax 0.12 compares the traced
    count's sharding, and JAX's error path for it scans every equation): a call per adapter made
    the 28B's 644 draws quadratic, minutes per trace."""
    stream = rngs.params
    key, count = stream.key[...], stream.count[...]
    keys = [jax.random.fold_in(key, count + i) for i in range(n)]
    stream.count[...] = count + n
    return keys


def apply(model: nnx.Module, cfg: LoraConfig, rngs: nnx.Rngs | int = 0) -> nnx.Module:
    """`model` with every Dense matching `cfg.targets` replaced by a LoraDense (in place; also
    returned). A pattern that matches no Dense layer is refused, naming it."""
    if not isinstance(rngs, nnx.Rngs):
        key = jax.random.fold_in(jax.random.key(rngs), _SALT)
        rngs = nnx.Rngs(params=key, dropout=jax.random.fold_in(key, 1))
    denses = _denses(model)
    chosen = [
        (path, m) for path, m in denses if any(names_layer(p, dotted(path)) for p in cfg.targets)
    ]
    for p in cfg.targets:
        if not any(names_layer(p, dotted(path)) for path, _ in denses):
            example = dotted(denses[0][0]) if denses else "(none)"
            raise ConfigError(  # a setting: one line from the CLIs (status 2)
                f"LoraConfig.targets: pattern {p!r} matches no Dense layer of "
                f"{type(model).__name__} (layer paths look like {example!r})"
            )
    keys = _draws(rngs, 2 * len(chosen))
    for i, (path, m) in enumerate(chosen):
        _replace(model, path, LoraDense(m, cfg, rngs, keys=keys[2 * i : 2 * i + 2]))
    for p in cfg.base_layers:
        if not any(names_layer(p, dotted(path)) for path, _ in denses):
            raise ConfigError(f"LoraConfig.base_layers: pattern {p!r} matches no Dense layer")
    for path, m in _denses(model):  # plain Dense layers left: those base_layers names
        if cfg.base_dtype != "float32" and any(
            names_layer(p, dotted(path)) for p in cfg.base_layers
        ):
            _replace(model, path, quantize.QuantizedDense(m, cfg.base_dtype))
    return model


def merge(model: nnx.Module) -> nnx.Module:
    """`model` with every LoraDense folded into a plain Dense, and every kernel stored in a base
    dtype back in float32 (in place; also returned)."""
    for path, m in _denses(model, LoraDense):
        _replace(model, path, m.plain(merge=True))
    for path, m in _denses(model, quantize.QuantizedDense):
        _replace(model, path, quantize.plain(m))
    return model


def strip(model: nnx.Module) -> nnx.Module:
    """`model` with every LoraDense replaced by its base Dense, adapters dropped, and every
    kernel in float32 (in place): the base model's shape, for loading pretrained weights."""
    for path, m in _denses(model, LoraDense):
        _replace(model, path, m.plain(merge=False))
    for path, m in _denses(model, quantize.QuantizedDense):
        _replace(model, path, quantize.plain(m))
    return model


def set_dropout(model: nnx.Module, train: bool) -> None:
    """Turns the adapters' input dropout on (training) or off."""
    for _, m in _denses(model, LoraDense):
        if m.lora_dropout is not None:
            m.lora_dropout.deterministic = not train


def is_adapter(path: str) -> bool:
    """Whether a dotted parameter path names a LoRA adapter weight."""
    return path.rpartition(".")[2] in ADAPTERS


def with_fresh_adapters(params: dict, fresh: dict) -> dict:
    """`params` (base weights, e.g. from a pretrained checkpoint) with the adapter leaves of
    `fresh` (a freshly initialised LoRA model's parameters) added where it has none."""

    def add(dst: dict, src: dict) -> dict:
        out = dict(dst)
        for k, v in src.items():
            if isinstance(v, dict):
                out[k] = add(dst.get(k, {}), v) if isinstance(dst.get(k, {}), dict) else dst[k]
            elif k in ADAPTERS and k not in dst:
                out[k] = jax.device_get(v)  # a host copy: `fresh` may be donated afterwards
        return out

    return add(params, fresh)

"""The model config of a train run, read from the resolved gin config it saved
(`<workdir>/config.gin`, written from `gin.config_str()`), without touching gin's global state.

Parsing the file with gin itself would need `gin.clear_config()` around it and so wipe the
caller's configuration (a library function must not). Only gin's statement parser is used here:
it turns the text into binding statements and leaves the registry alone. What a run's model is
follows from three bindings: `train.model_fn = @build_model`, `build_model.config = @<Config>()`
and the `<Config>.<field>` bindings (macros and scopes resolved as gin would); or, for a run
that took its model from a HuggingFace checkpoint, `build_model.config = @hf_model_config()`
and `hf_model_config.path` (that checkpoint's config.json is read again). A run with LoRA
adapters also binds `build_model.lora = @LoraConfig()` (`lora_config`).
"""

from __future__ import annotations

import dataclasses
import os

from chartjax.models.lora import LoraConfig
from chartjax.models.model_configs import Pix2StructConfig, T5Config
from chartjax.models.paligemma import PaliGemmaConfig
from chartjax.models.post_ln.bart import BartConfig
from chartjax.models.post_ln.deberta import DebertaConfig
from chartjax.models.post_ln.tapas import TapasConfig
from chartjax.models.relation_network import RNConfig

CONFIGS = {
    "T5Config": T5Config,
    "Pix2StructConfig": Pix2StructConfig,
    "DebertaConfig": DebertaConfig,
    "TapasConfig": TapasConfig,
    "BartConfig": BartConfig,
    "PaliGemmaConfig": PaliGemmaConfig,
}
HF_CONFIG = "hf_model_config"
# The FigureQA baselines (Relation Network, CNN+LSTM, text-only): `train.model_fn =
# @relation_network.build`, `relation_network.build.cfg = @RNConfig()`.
RN_FACTORY = "relation_network.build"


def hf_model_config(path: str, *, dtype: str = "bfloat16", overrides=None):
    """The chartjax config of HF checkpoint directory `path` (models/configurables.py's
    `hf_model_config`, the gin-free half)."""
    import dataclasses

    from chartjax.interop import hf

    path = os.path.expanduser(str(path))
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise FileNotFoundError(f"hf_model_config: no config.json in {path}")
    cfg = hf.read_config(path, dtype=dtype)
    return dataclasses.replace(cfg, **dict(overrides)) if overrides else cfg


@dataclasses.dataclass(frozen=True)
class _Ref:  # `@name` or `@name()`
    name: str
    evaluate: bool


@dataclasses.dataclass(frozen=True)
class _Macro:  # `%NAME`
    name: str


class _Bindings:
    """`(scope, configurable name) -> {argument: value}` of one gin text."""

    def __init__(self, text: str, where: str):
        from gin import config_parser

        class Delegate(config_parser.ParserDelegate):
            def configurable_reference(self, scoped_name, evaluate):
                return _Ref(scoped_name, evaluate)

            def macro(self, macro_name):
                return _Macro(macro_name)

        self.where = where
        self.table: dict[tuple[str, str], dict] = {}
        for st in config_parser.ConfigParser(text, Delegate()):
            if isinstance(st, config_parser.BindingStatement):
                # A configurable may be named with its module (`chartjax.models.T5Config`).
                name = st.selector.rpartition(".")[2] if st.arg_name else st.selector
                self.table.setdefault((st.scope, name), {})[st.arg_name] = st.value

    def args(self, name: str, scopes: tuple[str, ...]) -> dict:
        """The arguments bound to configurable `name` under the active `scopes` (outer first)."""
        out = dict(self.table.get(("", name), {}))
        for k in range(1, len(scopes) + 1):
            out.update(self.table.get(("/".join(scopes[:k]), name), {}))
        return {k: self.resolve(v) for k, v in out.items()}

    def resolve(self, value):
        if isinstance(value, _Macro):
            scope, _, name = value.name.rpartition("/")
            macro = self.table.get((scope, name), {})
            if "" not in macro:
                raise ValueError(f"{self.where}: macro %{value.name} is not defined")
            return self.resolve(macro[""])
        if isinstance(value, list | tuple):
            return type(value)(self.resolve(v) for v in value)
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        return value


def _split(ref: _Ref) -> tuple[tuple[str, ...], str]:
    *scopes, name = ref.name.split("/")
    return tuple(scopes), name.rpartition(".")[2]


def model_config(gin_file: str):
    """The model config that `train.model_fn` of the saved `gin_file` builds."""
    with open(gin_file) as f:
        bindings = _Bindings(f.read(), gin_file)
    model_fn = bindings.args("train", ()).get("model_fn")
    if model_fn is None:
        raise ValueError(f"{gin_file}: binds no train.model_fn")
    if not isinstance(model_fn, _Ref):
        raise ValueError(f"{gin_file}: train.model_fn is not a model factory: {model_fn!r}")
    scopes, factory = _split(model_fn)
    if model_fn.name.rpartition("/")[2] in (RN_FACTORY, f"chartjax.models.{RN_FACTORY}"):
        return _rn_config(bindings, scopes, gin_file)
    if factory != "build_model":
        raise ValueError(
            f"{gin_file}: train.model_fn is @{model_fn.name}, not a chartjax model "
            f"(@build_model, or @{RN_FACTORY} for FigureQA)"
        )
    config = bindings.args("build_model", scopes).get("config")
    if not isinstance(config, _Ref) or _split(config)[1] not in (*CONFIGS, HF_CONFIG):
        raise ValueError(
            f"{gin_file}: build_model.config is {config!r}, not one of "
            f"{', '.join('@' + c + '()' for c in (*CONFIGS, HF_CONFIG))}"
        )
    inner, name = _split(config)
    fields = bindings.args(name, scopes + inner)
    if name == HF_CONFIG:
        if "path" not in fields:
            raise ValueError(f"{gin_file}: {HF_CONFIG} has no path")
        try:
            return hf_model_config(**fields)
        except (TypeError, ValueError, FileNotFoundError) as e:
            raise ValueError(f"{gin_file}: bad {HF_CONFIG} ({e})") from None
    if any(isinstance(v, _Ref | _Macro) for v in fields.values()):
        raise ValueError(f"{gin_file}: {name} binds a configurable reference: {fields}")
    try:
        return CONFIGS[name](**fields)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{gin_file}: bad {name} ({e})") from None


def _rn_config(bindings: _Bindings, scopes: tuple[str, ...], gin_file: str) -> RNConfig:
    """The RNConfig of `relation_network.build.cfg` (the factory's arguments are stored under
    its last name part, `build`)."""
    config = bindings.args("build", scopes).get("cfg")
    if config is None:  # relation_network.build's default
        return RNConfig()
    if not isinstance(config, _Ref) or _split(config)[1] != "RNConfig":
        raise ValueError(f"{gin_file}: relation_network.build.cfg is {config!r}, not @RNConfig()")
    inner, name = _split(config)
    fields = bindings.args(name, scopes + inner)
    try:
        return RNConfig(**fields)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{gin_file}: bad RNConfig ({e})") from None


def lora_config(gin_file: str) -> LoraConfig | None:
    """The LoRA adapters `build_model.lora` of the saved `gin_file` add to its model, or None."""
    with open(gin_file) as f:
        bindings = _Bindings(f.read(), gin_file)
    model_fn = bindings.args("train", ()).get("model_fn")
    scopes = _split(model_fn)[0] if isinstance(model_fn, _Ref) else ()
    ref = bindings.args("build_model", scopes).get("lora")
    if ref is None:
        return None
    if not isinstance(ref, _Ref) or _split(ref)[1] != "LoraConfig":
        raise ValueError(f"{gin_file}: build_model.lora is {ref!r}, not @LoraConfig()")
    inner, name = _split(ref)
    fields = bindings.args(name, scopes + inner)
    try:
        return LoraConfig(**fields)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{gin_file}: bad LoraConfig ({e})") from None


def hf_source(gin_file: str) -> str | None:
    """The HF checkpoint directory a saved run took its model config from
    (`hf_model_config.path`), or None when its model is configured field by field."""
    with open(gin_file) as f:
        bindings = _Bindings(f.read(), gin_file)
    model_fn = bindings.args("train", ()).get("model_fn")
    if not isinstance(model_fn, _Ref):
        return None
    scopes, _ = _split(model_fn)
    config = bindings.args("build_model", scopes).get("config")
    if not isinstance(config, _Ref) or _split(config)[1] != HF_CONFIG:
        return None
    inner, _ = _split(config)
    path = bindings.args(HF_CONFIG, scopes + inner).get("path")
    return os.path.expanduser(path) if isinstance(path, str) else None


# The bindings of the input side a run saved: which vocabulary it tokenized with and how its
# images became patches, so an export can carry them (chartjax/interop/tokenizer_export.py).
_FEATURE_FIELDS = (
    "vocab_file",
    "modality",
    "max_patches",
    "patch_size",
    "max_input_len",
    "header_font_size",
    "font_path",
)
_DECODING_FIELDS = ("max_decode_len", "beam_size", "alpha")
# The train tasks whose image records carry a prompt rendered above the chart (HF `is_vqa`):
# DePlot's and ChartCheck's MatCha prompts, ChartQA's questions; CHART-Info only in its
# DePlot-style task 6b.
_VQA_TASKS = {
    "deplot": None,
    "chartcheck": None,
    "chartqa": None,
    "chart_info": ("mode", "task6b"),
}


def input_settings(gin_file: str) -> dict:
    """What the saved `gin_file` says about the run's inputs, with macros resolved:
    `vocab_file` (`Features.vocab_file`, or a classifier's `ClassifierFeatures.tokenizer`),
    `modality`, `max_patches`, `patch_size`, `max_input_len`, `header_font_size`, `font_path`
    and `Decoding`'s `max_decode_len`, `beam_size`, `alpha` (those bound), `task`
    (`train.task`), `task_args` (the task factory's bindings, e.g. `figureqa_task.image_size`)
    and `is_vqa` (whether its image prompts are rendered as a header; absent when the task does
    not say)."""
    with open(gin_file) as f:
        bindings = _Bindings(f.read(), gin_file)

    def plain(name: str) -> dict:
        """Unscoped `name.<arg>` values; a reference (`@x()`) or an undefined macro (a
        `%gin.REQUIRED` the run never read) is no setting."""
        out = {}
        for arg, value in bindings.table.get(("", name), {}).items():
            try:
                value = bindings.resolve(value)
            except ValueError:
                continue
            if not isinstance(value, _Ref):
                out[arg] = value
        return out

    features = plain("Features")
    out = {k: features[k] for k in _FEATURE_FIELDS if k in features}
    decoding = plain("Decoding")
    out.update({k: decoding[k] for k in _DECODING_FIELDS if k in decoding})
    tokenizer = plain("ClassifierFeatures").get("tokenizer")
    if "vocab_file" not in out and isinstance(tokenizer, str):
        out["vocab_file"] = tokenizer
    task = plain("train").get("task")
    if isinstance(task, str):
        out["task"] = task
        out["task_args"] = plain(f"{task}_task")
        if task in _VQA_TASKS:
            rule = _VQA_TASKS[task]
            args = plain(f"{task}_task") if rule else {}
            out["is_vqa"] = rule is None or args.get(rule[0]) == rule[1]
    return out

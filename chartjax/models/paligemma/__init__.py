"""PaliGemma (1 and 2; ChartGemma is a PaliGemma 1): SigLIP image encoder, a linear projection
to the decoder width, and a Gemma / Gemma 2 decoder with prefix-LM attention, numerically as HF
transformers' `PaliGemmaForConditionalGeneration` (docs/models.md §8).

Batch (HF's names and layout, images NHWC):
- `image` float32 `[B, H, W, C]`, pixels in [-1, 1] (SiglipImageProcessor's output, transposed);
- `input_ids` int `[B, T]`: `image_token_id` placeholders (one per image patch, usually first),
  then `<bos>` + prefix + `\\n`, then the suffix;
- `token_type_ids` int `[B, T]`: 0 for image + prefix, 1 for the suffix;
- `attention_mask` int/bool `[B, T]` (optional; 1 = a real token).
The projected image features replace the embeddings at the image-token positions, in order (HF's
`masked_scatter`); the text embeddings are scaled by sqrt(width), the image features are not.
Positions start at 1 (HF's PaliGemma). Attention: full among the image + prefix tokens, causal
for the suffix (gemma.attention_masks). The loss (`prefix_lm_loss`) covers the suffix only:
token t+1 predicted at t wherever token t+1 is a valid suffix token.

The config is flat (one frozen dataclass, so gin, the saved config.gin and chartjax checkpoints
take it as they take the other families'); `.text` and `.vision` give the decoder's and the
encoder's own configs.

The PaliGemma room (models/paligemma/): the model here; siglip.py (its image encoder) and
gemma.py (its decoders).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from chartjax.models.layers import Dense
from chartjax.models.losses import cross_entropy_with_z_loss
from chartjax.models.paligemma.gemma import GemmaConfig, GemmaDecoder, attention_masks
from chartjax.models.paligemma.siglip import SiglipConfig, SiglipEncoder


@dataclasses.dataclass(frozen=True)
class PaliGemmaConfig:
    """Decoder fields as gemma.GemmaConfig; `vision_*` as siglip.SiglipConfig. Defaults:
    PaliGemma 1 3B at 224 (Gemma 2B: 18 layers, width 2048, MQA, head 256; So400m/14)."""

    vocab_size: int = 257152
    emb_dim: int = 2048
    num_heads: int = 8
    num_kv_heads: int = 1
    head_dim: int = 256
    mlp_dim: int = 16384
    num_layers: int = 18
    version: int = 1  # the decoder: 1 Gemma, 2 Gemma 2
    query_pre_attn_scalar: float | None = None
    attn_logit_softcap: float | None = None
    final_logit_softcap: float | None = None
    sliding_window: int | None = None
    layer_types: tuple[str, ...] = ()
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    vision_emb_dim: int = 1152
    vision_num_heads: int = 16
    vision_mlp_dim: int = 4304
    vision_num_layers: int = 27
    image_size: int = 224
    patch_size: int = 14
    num_channels: int = 3
    vision_layer_norm_eps: float = 1e-6
    image_token_id: int = 257152
    pad_id: int = 0
    eos_id: int = 1
    bos_id: int = 2
    dropout_rate: float = 0.0  # residual dropout of the decoder (big_vision's "LLM dropout")
    z_loss: float = 0.0
    # big_vision's `label_smoothing`: the target token weighs 1 - s, every other s / (V - 1).
    label_smoothing: float = 0.0
    dtype: str = "bfloat16"  # activation dtype; parameters are float32
    attention_impl: str = "dot_product"
    remat_policy: str = "none"

    def __post_init__(self):
        object.__setattr__(self, "layer_types", tuple(self.layer_types))
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(
                f"PaliGemmaConfig.label_smoothing must be in [0, 1), not {self.label_smoothing!r}"
            )
        self.text, self.vision  # noqa: B018  (validates both halves, naming their fields)

    @property
    def activation_dtype(self):
        return jnp.dtype(self.dtype)

    @property
    def text(self) -> GemmaConfig:
        return GemmaConfig(
            vocab_size=self.vocab_size,
            emb_dim=self.emb_dim,
            num_heads=self.num_heads,
            num_kv_heads=self.num_kv_heads,
            head_dim=self.head_dim,
            mlp_dim=self.mlp_dim,
            num_layers=self.num_layers,
            version=self.version,
            query_pre_attn_scalar=self.query_pre_attn_scalar,
            attn_logit_softcap=self.attn_logit_softcap,
            final_logit_softcap=self.final_logit_softcap,
            sliding_window=self.sliding_window,
            layer_types=self.layer_types,
            rope_theta=self.rope_theta,
            rms_norm_eps=self.rms_norm_eps,
            dropout_rate=self.dropout_rate,
            dtype=self.dtype,
            attention_impl=self.attention_impl,
            remat_policy=self.remat_policy,
        )

    @property
    def vision(self) -> SiglipConfig:
        return SiglipConfig(
            emb_dim=self.vision_emb_dim,
            num_heads=self.vision_num_heads,
            mlp_dim=self.vision_mlp_dim,
            num_layers=self.vision_num_layers,
            image_size=self.image_size,
            patch_size=self.patch_size,
            num_channels=self.num_channels,
            layer_norm_eps=self.vision_layer_norm_eps,
            dtype=self.dtype,
            attention_impl=self.attention_impl,
            remat_policy=self.remat_policy,
        )

    @property
    def num_image_tokens(self) -> int:
        return (self.image_size // self.patch_size) ** 2


class PaliGemma(nnx.Module):
    """`vision_tower` (SigLIP), `multi_modal_projector` (biased linear), `decoder` (Gemma)."""

    def __init__(self, cfg: PaliGemmaConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.vision_tower = SiglipEncoder(cfg.vision, rngs=rngs)
        self.multi_modal_projector = Dense(
            cfg.vision_emb_dim,
            cfg.emb_dim,
            (None, "embed"),
            use_bias=True,
            dtype=cfg.activation_dtype,
            rngs=rngs,
        )
        self.decoder = GemmaDecoder(cfg.text, rngs=rngs)

    def image_features(self, images: jax.Array, deterministic: bool = True) -> jax.Array:
        """Projected image tokens `[B, num_image_tokens, emb_dim]`."""
        return self.multi_modal_projector(self.vision_tower(images, deterministic=deterministic))

    def embed_inputs(self, batch, deterministic: bool = True) -> jax.Array:
        """Token embeddings with the image features at the image-token positions, in order."""
        ids = batch["input_ids"]
        is_image = ids == self.cfg.image_token_id
        # The image id may lie beyond the table (HF then looks up id 0 there; replaced anyway).
        x = self.decoder.embed(jnp.where(is_image, 0, ids))
        feats = self.image_features(batch["image"], deterministic).astype(x.dtype)
        index = jnp.clip(jnp.cumsum(is_image, axis=1) - 1, 0, feats.shape[1] - 1)
        placed = jnp.take_along_axis(feats, index[..., None], axis=1)
        return jnp.where(is_image[..., None], placed, x)

    def hidden_states(self, batch, *, deterministic: bool) -> jax.Array:
        ids = batch["input_ids"]
        valid = batch.get("attention_mask")
        valid = jnp.ones(ids.shape, bool) if valid is None else valid.astype(bool)
        types = batch.get("token_type_ids")
        prefix = None if types is None else types == 0
        masks = attention_masks(valid, prefix, self.cfg.sliding_window)
        positions = jnp.broadcast_to(jnp.arange(ids.shape[1])[None] + 1, ids.shape)
        x = self.embed_inputs(batch, deterministic)
        return self.decoder(x, positions, masks, deterministic=deterministic)

    def __call__(self, batch, *, deterministic: bool) -> jax.Array:
        """Logits `[B, T, vocab]` float32 at every position (the next token's)."""
        return self.decoder.logits(self.hidden_states(batch, deterministic=deterministic))


def suffix_weights(batch) -> jax.Array:
    """`[B, T-1]` float32: 1 where token t+1 is a valid suffix token (predicted at t)."""
    ids = batch["input_ids"]
    types = batch.get("token_type_ids")
    w = jnp.ones(ids.shape, bool) if types is None else types == 1
    valid = batch.get("attention_mask")
    if valid is not None:
        w = w & valid.astype(bool)
    return w[:, 1:].astype(jnp.float32)


def with_image_tokens(cfg: PaliGemmaConfig, batch) -> dict:
    """A batch of text alone (`input_ids`, `token_type_ids`, `attention_mask` `[B, T]`: `<bos>`
    + prefix + `\\n`, then the suffix; no image placeholders) in the model's layout: the
    `num_image_tokens` placeholders put in front, of type 0 (prefix) and valid, as
    `PaliGemmaProcessor` lays an example out (the training tasks' featurizers leave them out, so
    one featurizer serves any image size)."""
    ids = batch["input_ids"]
    b, n = ids.shape[0], cfg.num_image_tokens
    out = dict(batch)
    out["input_ids"] = jnp.concatenate(
        [jnp.full((b, n), cfg.image_token_id, ids.dtype), ids], axis=1
    )
    for key in ("token_type_ids", "attention_mask"):
        if key in batch:
            x = batch[key]
            fill = jnp.zeros if key == "token_type_ids" else jnp.ones
            out[key] = jnp.concatenate([fill((b, n), x.dtype), x], axis=1)
    return out


def prefix_lm_loss(model: PaliGemma, batch, *, deterministic: bool) -> tuple[jax.Array, dict]:
    """Mean next-token loss over the suffix tokens (image and prefix carry no loss), with the
    aux metrics of `losses.seq2seq_loss` (`z_loss`, `num_tokens`, `accuracy`). With
    `cfg.label_smoothing` s > 0 each token's cross-entropy is big_vision's smoothed one,
    `-(1 - s) log p(target) - s / (V - 1) * sum of log p(v) over the other tokens v`.

    Logits are made at the text positions alone: every example's `num_image_tokens` image
    tokens come before its suffix (they open the prefix, whatever the padding side), so no
    position among the first `num_image_tokens` predicts a suffix token, and the vocabulary
    projection there (float32 `[B, 1024, 257216]` at 448 px, ~1 GB an example, and its
    gradient) would carry weight 0."""
    start = min(model.cfg.num_image_tokens, batch["input_ids"].shape[1] - 1)
    hidden = model.hidden_states(batch, deterministic=deterministic)[:, start:]
    logits = model.decoder.logits(hidden)[:, :-1]
    targets = batch["input_ids"][:, start + 1 :]
    weights = suffix_weights(batch)[:, start:]
    total, z_term, n = cross_entropy_with_z_loss(logits, targets, weights, model.cfg.z_loss)
    s = model.cfg.label_smoothing
    if s:
        logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
        target_logp = jnp.take_along_axis(logp, targets[..., None].astype(jnp.int32), -1)[..., 0]
        others = jnp.sum(logp, axis=-1) - target_logp
        # The plain cross-entropy (-log p(target)) is in `total`: move s of its weight.
        smooth = s * target_logp - s / (logp.shape[-1] - 1) * others
        total = total + jnp.sum(smooth * weights)
    denom = jnp.maximum(n, 1.0)
    correct = (jnp.argmax(logits, axis=-1) == targets).astype(jnp.float32) * weights
    aux = {"z_loss": z_term / denom, "num_tokens": n, "accuracy": jnp.sum(correct) / denom}
    return total / denom, aux


def build(config: PaliGemmaConfig, rngs: nnx.Rngs | int = 0) -> PaliGemma:
    """Factory used by the train loop: a freshly initialised PaliGemma."""
    if isinstance(rngs, int):
        rngs = nnx.Rngs(params=rngs, dropout=rngs + 1)
    return PaliGemma(config, rngs=rngs)

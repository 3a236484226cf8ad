"""PaliGemma decoding with a KV cache: prefix prefill, then greedy, beam search or sampling,
token for token as HF transformers' `PaliGemmaForConditionalGeneration.generate`.

    tokens = generate(model, pixel_values, input_ids, attention_mask, max_new_tokens=48)

Inputs are laid out as `PaliGemmaProcessor` returns them for a prompt without a suffix:
`pixel_values` float `[B, C, H, W]` (NCHW, HF's layout), `input_ids` `[B, T]` with the image
tokens (`<image>` x num_image_tokens, `<bos>`, prompt, `\\n`), `attention_mask` `[B, T]` (1 = a
real token). Padding may be on either side, or both: HF's GemmaTokenizer, and so the processor,
pads on the LEFT by default; chartjax's own batches (testing/tiny_paligemma.py, the
featurizers) pad on the right. Each row is decoded as if it were alone: the positions of its
tokens count its real tokens from 1 (HF's PaliGemma: `cumsum(attention_mask)`, 1-based), the
pads are masked out as keys, and its first new token follows its last real token.

The whole prompt is one prefix block: attention is full (bidirectional) among its real tokens in
every layer, sliding ones included (the processor's `token_type_ids` are 0 over a prompt, and HF
makes the `token_type_ids == 0` block bidirectional; big_vision decodes the same way). The
generated tokens then attend causally, to the prompt and to the tokens before them; in Gemma 2's
sliding layers only to keys whose position lies within `sliding_window` of theirs
(`key > query - window`, HF's rule), prompt keys included.

The cache (gemma.GemmaDecoder.init_cache) has `T + max_new_tokens` slots: the prompt's T slots
(pads too, masked), then one per new token, shared by every row; a key's position is stored
beside it, so a row's pads never shift its positions. Sliding layers keep every slot too (the
window is a mask over key positions, not a ring buffer): against Gemma 2's window (HF's default
4096) PaliGemma 2's sequences (256-4096 image tokens and a short text) leave little to drop.

`decode_in_jit` is greedy / beam decoding as one traced function, for a caller's own jitted
step (the training tasks' evaluation, chartjax/tasks/core/prefix_lm.py): the same prefill and loops.

Two jitted programs per batch shape: the prefill (image encoder and prompt, once; shared by
every method), then the decoding loop (one per method; `temperature`, `top_k`, `top_p`, EOS and
pad ids are traced, so changing them does not recompile), a `lax.while_loop` of at most
`max_new_tokens` steps that stops once every row is finished (beam search: once no row can
improve); each step feeds one token per row (per beam). Rows emit `pad_id` after their EOS.

- greedy: argmax of the logits (HF `do_sample=False, num_beams=1`); "beam" with one beam is
  greedy too, as in HF.
- sample: logits / temperature, then top-k (`top_k > 0`), then top-p (`top_p < 1`: the smallest
  set of most likely tokens whose probability reaches `top_p`), in HF's order, then a draw from
  `rng` (a `jax.random.key`, or an int seed; None: key 0) folded with the step index.
  `temperature=0` is greedy. With top-k or top-p each step sorts the vocabulary once.
- beam: HF's beam search with its defaults, `length_penalty=1.0` and `early_stopping=False`:
  2 x num_beams candidates per step; a candidate ending in EOS (or reaching `max_new_tokens`)
  among the best num_beams enters the finished pool scored `sum(log p) / new_length **
  length_penalty` (EOS counted in the length); the best num_beams unfinished candidates go on; a
  row stops improving once its pool is full and its best running beam, scored at its current
  length, cannot beat the worst finished one (HF's heuristic for `early_stopping=False`; `True`
  stops a row as soon as its pool is full, "never" scores the running beam at `max_new_tokens`
  when `length_penalty > 0`). The output is the pool's best sequence.

Scores (`decode`): greedy and sampling return the summed log-probabilities of the emitted tokens
(untempered, EOS included); beam search the length-penalized score of the returned sequence
(HF's `sequences_scores`).

Over a device mesh: called inside `chartjax.sharding.activate(mesh, rules)`, the batch is split
over the `batch` rule's mesh axis (when the mesh divides it), the parameters replicated, the
decoder's activations and the KV cache constrained to that split, and the tokens gathered back
(replicated) before they leave the devices. Replicate the model on the mesh once beforehand
(its arrays then already have the replicated sharding), or each call copies the parameters to
every device. Tested on one process (8 simulated CPU devices); with several processes each would
pass the same global batch (untested).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from chartjax import sharding
from chartjax.models.paligemma import PaliGemma
from chartjax.models.paligemma.gemma import FULL, SLIDING

NEG = -1.0e9  # HF's "impossible" score in beam search
METHODS = ("greedy", "beam", "sample")


# --------------------------------------------------------------------------- prefill / step


@dataclasses.dataclass(frozen=True)
class _Rows:
    """Per-row bookkeeping of the cache: `kpos [B, S]` the position of the key in each slot,
    `prompt_pos [B, T]` the prompt's positions, `prompt_valid [B, S]` its real tokens,
    `lengths [B]` their number, `t` the prompt's padded length (the first generated slot)."""

    t: int
    lengths: jax.Array
    prompt_pos: jax.Array
    kpos: jax.Array
    prompt_valid: jax.Array

    @classmethod
    def of(cls, valid: jax.Array, max_new: int) -> _Rows:
        pos = jnp.cumsum(valid, axis=1, dtype=jnp.int32)  # 1-based at the real tokens
        lengths = pos[:, -1]
        gen = lengths[:, None] + 1 + jnp.arange(max_new, dtype=jnp.int32)[None]
        pad = jnp.zeros((valid.shape[0], max_new), bool)
        kpos, prompt_valid = jnp.concatenate([pos, gen], 1), jnp.concatenate([valid, pad], 1)
        return cls(valid.shape[1], lengths, pos, kpos, prompt_valid)

    def repeat(self, k: int) -> _Rows:
        """Each row `k` times in a row (the beams of a batch row)."""
        arrays = ("lengths", "prompt_pos", "kpos", "prompt_valid")
        return dataclasses.replace(
            self, **{f: jnp.repeat(getattr(self, f), k, axis=0) for f in arrays}
        )


def _prefill(model, image, ids, valid, max_new: int):
    """Image encoder + prompt with full attention among the real prompt tokens -> (logits of
    each row's last real token `[B, V]` float32, the filled cache, `_Rows`)."""
    b, t = ids.shape
    rows = _Rows.of(valid, max_new)
    x = model.embed_inputs({"input_ids": ids, "image": image}, deterministic=True)
    full = jnp.broadcast_to(valid[:, None, None, :], (b, 1, t, t))
    cache = model.decoder.init_cache(b, t + max_new)
    h, cache = model.decoder.extend(x, rows.prompt_pos, {FULL: full, SLIDING: full}, cache, 0)
    last = t - 1 - jnp.argmax(valid[:, ::-1], axis=1)
    h_last = jnp.take_along_axis(h, last[:, None, None], axis=1)
    return model.decoder.logits(h_last)[:, 0], cache, rows


def _step(model, tokens, j, cache, rows: _Rows):
    """Feed generated token number `j` (`tokens [B]`, traced `j`) at slot `t + j` -> (next-token
    logits `[B, V]` float32, cache)."""
    cfg = model.decoder.cfg
    qpos = rows.lengths + 1 + j  # [B]
    slot = jnp.arange(rows.kpos.shape[1])
    valid = rows.prompt_valid | ((slot >= rows.t) & (slot <= rows.t + j))[None]
    masks = {FULL: valid[:, None, None, :]}
    if cfg.sliding_window is not None:
        local = valid & (rows.kpos > qpos[:, None] - cfg.sliding_window)
        masks[SLIDING] = local[:, None, None, :]
    x = model.decoder.embed(tokens[:, None])
    h, cache = model.decoder.extend(x, qpos[:, None], masks, cache, rows.t + j)
    return model.decoder.logits(h)[:, 0], cache


# --------------------------------------------------------------------------- greedy / sampling


def _filter_logits(logits, temperature, top_k, top_p):
    """HF's order: temperature, then top-k (`top_k > 0`), then top-p over what top-k kept
    (`top_p < 1`); removed tokens -> -inf. `top_k` and `top_p` are traced (one compile for
    every value): one descending sort per step serves both."""
    logits = logits / temperature
    v = logits.shape[-1]
    ranked = jnp.sort(logits, axis=-1)[:, ::-1]
    rank = jnp.arange(v)[None]
    k = jnp.where(top_k > 0, jnp.minimum(top_k, v), v)
    in_k = rank < k
    probs = jax.nn.softmax(jnp.where(in_k, ranked, -jnp.inf), axis=-1)
    above = jnp.cumsum(probs, axis=-1) - probs  # mass of the more likely tokens
    keep = in_k & ((above < top_p) | (top_p >= 1.0))
    cutoff = jnp.min(jnp.where(keep, ranked, jnp.inf), axis=-1, keepdims=True)
    return jnp.where(logits < cutoff, -jnp.inf, logits)


def _sample_loop(model, logits, cache, rows, consts, *, max_new, greedy, filtered):
    rng, temperature, top_k, top_p, eos_id, pad_id = consts
    b = logits.shape[0]

    def choose(logits, n):
        if greedy:
            tok = jnp.argmax(logits, axis=-1)
        else:
            if filtered:
                scaled = _filter_logits(logits, temperature, top_k, top_p)
            else:
                scaled = logits / temperature
            tok = jax.random.categorical(jax.random.fold_in(rng, n), scaled, axis=-1)
        tok = tok.astype(jnp.int32)
        logp = jnp.take_along_axis(jax.nn.log_softmax(logits, axis=-1), tok[:, None], axis=-1)
        return tok, logp[:, 0]

    def body(c):
        n, out, cache, logits, done, score, _ = c
        tok, logp = choose(logits, n)
        tok = jnp.where(done, pad_id, tok)
        score = score + jnp.where(done, 0.0, logp)
        out = jax.lax.dynamic_update_slice_in_dim(out, tok[:, None], n, axis=1)
        done = done | (tok == eos_id)
        more = (n + 1 < max_new) & ~jnp.all(done)
        # The next token's logits, unless this was the last step.
        logits, cache = jax.lax.cond(
            more,
            lambda cache: _step(model, tok, n, cache, rows),
            lambda cache: (logits, cache),
            cache,
        )
        return n + 1, out, cache, logits, done, score, more

    out = jnp.full((b, max_new), pad_id, jnp.int32)
    done, score = jnp.zeros((b,), bool), jnp.zeros((b,), jnp.float32)
    init = (jnp.int32(0), out, cache, logits, done, score, jnp.bool_(True))
    _, out, _, _, _, score, _ = jax.lax.while_loop(lambda c: c[-1], body, init)
    return out, score


# --------------------------------------------------------------------------- beam search


def _beam_loop(model, logits, cache, rows, consts, *, max_new, k, length_penalty, early_stopping):
    eos_id, pad_id = consts[-2:]
    b, v = logits.shape
    cand = 2 * k  # HF: max(2, 1 + number of EOS ids) * num_beams, one EOS id here
    rows = rows.repeat(k)
    cache = jax.tree.map(lambda x: jnp.repeat(x, k, axis=0), cache)
    stop_when_full = early_stopping is True
    best_at_max = early_stopping == "never" and length_penalty > 0

    def penalty(length):
        return jnp.asarray(length, jnp.float32) ** length_penalty

    def advance(n, logits, s):
        """One HF beam step at new-token index `n` from the running beams' logits `[B*K, V]`."""
        run_seqs, run_scores, pool_seqs, pool_scores, pool_done, open_ = s
        logp = jax.nn.log_softmax(logits, axis=-1).reshape(b, k, v)
        total = (logp + run_scores[:, :, None]).reshape(b, k * v)
        vals, idx = jax.lax.top_k(total, cand)
        beam, tok = idx // v, (idx % v).astype(jnp.int32)
        seqs = jnp.take_along_axis(run_seqs, beam[:, :, None], axis=1)
        seqs = jax.lax.dynamic_update_slice_in_dim(seqs, tok[:, :, None], n, axis=2)
        ends = (tok == eos_id) | (n + 1 >= max_new)  # HF's EOS and max-length criteria
        # The best k candidates that go on (the ending ones pushed out by NEG).
        run_vals, keep = jax.lax.top_k(vals + jnp.where(ends, NEG, 0.0), k)
        run_seqs = jnp.take_along_axis(seqs, keep[:, :, None], axis=1)
        src = jnp.take_along_axis(beam, keep, axis=1)
        # Ending candidates among the best k enter the finished pool, length-penalized.
        just = ends & (jnp.arange(cand) < k)[None]
        fin = vals / penalty(n + 1)
        full = jnp.all(pool_done, axis=1, keepdims=True)
        fin = fin + jnp.where(full & stop_when_full, NEG, 0.0)
        fin = fin + jnp.where(open_[:, None], 0.0, NEG) + jnp.where(just, 0.0, NEG)
        scores = jnp.concatenate([pool_scores, fin], axis=1)
        pool_scores, top = jax.lax.top_k(scores, k)
        pool_seqs = jnp.take_along_axis(
            jnp.concatenate([pool_seqs, seqs], axis=1), top[:, :, None], axis=1
        )
        pool_done = jnp.take_along_axis(jnp.concatenate([pool_done, just], axis=1), top, axis=1)
        # Can the best running beam still beat the worst finished one? (HF's heuristic)
        best = run_vals[:, 0] / penalty(max_new if best_at_max else n + 1)
        worst = jnp.where(pool_done, jnp.min(pool_scores, axis=1, keepdims=True), NEG)
        open_ = open_ & jnp.any(best[:, None] > worst, axis=1)
        more = jnp.any(open_) & ~(jnp.all(pool_done) & stop_when_full) & ~jnp.all(ends)
        return (run_seqs, run_vals, pool_seqs, pool_scores, pool_done, open_), src, more

    def reorder(x, src):
        x = x.reshape(b, k, *x.shape[1:])
        x = jnp.take_along_axis(x, src.reshape(b, k, *([1] * (x.ndim - 2))), axis=1)
        return x.reshape(b * k, *x.shape[2:])

    def feed(state, src, n):
        def run(cache):
            cache = jax.tree.map(lambda x: reorder(x, src), cache)
            last = jax.lax.dynamic_index_in_dim(state[0], n, axis=2, keepdims=False)
            return _step(model, last.reshape(-1), n, cache, rows)

        return run

    def body(c):
        n, state, cache, logits, _ = c
        state, src, more = advance(n, logits, state)
        more = more & (n + 1 < max_new)
        logits, cache = jax.lax.cond(
            more, feed(state, src, n), lambda cache: (logits, cache), cache
        )
        return n + 1, state, cache, logits, more

    seqs0 = jnp.full((b, k, max_new), pad_id, jnp.int32)
    state = (
        seqs0,
        # Only the first beam is live at the start, so the first step picks no duplicates.
        jnp.tile(jnp.array([0.0] + [NEG] * (k - 1), jnp.float32), (b, 1)),
        seqs0,
        jnp.full((b, k), NEG, jnp.float32),
        jnp.zeros((b, k), bool),
        jnp.ones((b,), bool),
    )
    init = (jnp.int32(0), state, cache, jnp.repeat(logits, k, axis=0), jnp.bool_(True))
    _, state, _, _, _ = jax.lax.while_loop(lambda c: c[-1], body, init)
    return state[2][:, 0], state[3][:, 0]


# --------------------------------------------------------------------------- entry points
# Two programs: the prefill (shared by every method) and the decoding loop.


def decode_in_jit(
    model: PaliGemma,
    image: jax.Array,
    input_ids: jax.Array,
    attention_mask: jax.Array,
    *,
    max_new_tokens: int,
    num_beams: int = 1,
    eos_id: int = 1,
    pad_id: int = 0,
) -> jax.Array:
    """Greedy decoding (beam search with `num_beams` > 1, HF's defaults) as a traced function,
    for a caller's own jitted step (the training tasks' evaluation): `image` NHWC, the prompt
    laid out as for `generate` -> new tokens `[B, max_new_tokens]` int32 (`pad_id` after EOS).
    The same prefill and loops as `generate`, in one program; no placement of its own (the
    caller's jit shards the batch)."""
    valid = attention_mask.astype(bool)
    logits, cache, rows = _prefill(model, image, input_ids, valid, max_new_tokens)
    consts = (
        jax.random.key(0),
        jnp.float32(1.0),
        jnp.int32(0),
        jnp.float32(1.0),
        jnp.int32(eos_id),
        jnp.int32(pad_id),
    )
    if num_beams > 1:
        kw = {"length_penalty": 1.0, "early_stopping": False}
        tokens, _ = _beam_loop(
            model, logits, cache, rows, consts, max_new=max_new_tokens, k=num_beams, **kw
        )
    else:
        tokens, _ = _sample_loop(
            model, logits, cache, rows, consts, max_new=max_new_tokens, greedy=True, filtered=False
        )
    return tokens


@functools.partial(jax.jit, static_argnums=(0,), static_argnames=("max_new",))
def _prefill_jit(graphdef, state, image, ids, valid, *, max_new):
    return _prefill(nnx.merge(graphdef, state), image, ids, valid, max_new)[:2]


@functools.partial(
    jax.jit,
    static_argnums=(0,),
    static_argnames=(
        "max_new",
        "method",
        "num_beams",
        "filtered",
        "length_penalty",
        "early_stopping",
    ),
)
def _loop_jit(
    graphdef,
    state,
    logits,
    cache,
    valid,
    consts,
    *,
    max_new,
    method,
    num_beams,
    filtered,
    length_penalty,
    early_stopping,
):
    model = nnx.merge(graphdef, state)
    common = (model, logits, cache, _Rows.of(valid, max_new), consts)
    if method == "beam":
        kw = {"length_penalty": length_penalty, "early_stopping": early_stopping}
        tokens, scores = _beam_loop(*common, max_new=max_new, k=num_beams, **kw)
    else:
        greedy = method == "greedy"
        tokens, scores = _sample_loop(*common, max_new=max_new, greedy=greedy, filtered=filtered)
    context = sharding.active()
    if context is not None:  # gather the rows (replicated) before they leave the devices
        replicated = NamedSharding(context[0], PartitionSpec())
        tokens = jax.lax.with_sharding_constraint(tokens, replicated)
        scores = jax.lax.with_sharding_constraint(scores, replicated)
    return tokens, scores


def _place(arrays, state):
    """Inside `sharding.activate`: the batch split along `batch` (when the mesh divides it), the
    state replicated. Outside: unchanged."""
    context = sharding.active()
    if context is None:
        return arrays, state
    mesh, rules = context
    out = []
    for a in arrays:
        spec = sharding.logical_to_spec(("batch",) + (None,) * (a.ndim - 1), rules)
        if not sharding.fits(spec, a.shape, mesh):
            spec = PartitionSpec()
        out.append(jax.device_put(a, NamedSharding(mesh, spec)))
    return out, jax.device_put(state, NamedSharding(mesh, PartitionSpec()))


def _key(rng):
    if rng is None:
        return jax.random.key(0)
    if isinstance(rng, int | np.integer):
        return jax.random.key(int(rng))
    return rng


def decode(
    model: PaliGemma,
    pixel_values,
    input_ids,
    attention_mask,
    *,
    max_new_tokens: int,
    method: str = "greedy",
    num_beams: int = 1,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    eos_id: int = 1,
    pad_id: int = 0,
    rng=None,
    length_penalty: float = 1.0,
    early_stopping: bool | str = False,
) -> tuple[np.ndarray, np.ndarray]:
    """`generate` with the scores (see the module docstring) and HF's two other beam settings:
    -> (tokens `[B, max_new_tokens]` int32, scores `[B]` float32)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive int, got {max_new_tokens!r}")
    if not isinstance(num_beams, int) or num_beams < 1:
        raise ValueError(f"num_beams must be a positive int, got {num_beams!r}")
    if method != "beam" and num_beams != 1:
        raise ValueError(f"num_beams={num_beams} needs method='beam' (got {method!r})")
    if temperature < 0 or not 0 < top_p <= 1 or top_k < 0:
        raise ValueError(
            f"need temperature >= 0, 0 < top_p <= 1, top_k >= 0; got {temperature}, {top_p}, "
            f"{top_k}"
        )
    if early_stopping not in (True, False, "never"):
        raise ValueError(f"early_stopping must be True, False or 'never': {early_stopping!r}")
    if (method == "sample" and temperature == 0) or (method == "beam" and num_beams == 1):
        method = "greedy"
    ids = np.asarray(input_ids, np.int32)
    valid = np.asarray(attention_mask).astype(bool)
    if ids.ndim != 2 or valid.shape != ids.shape:
        raise ValueError(f"input_ids {ids.shape} and attention_mask {valid.shape}: want [B, T]")
    image = np.transpose(np.asarray(pixel_values, np.float32), (0, 2, 3, 1))  # NCHW -> NHWC
    graphdef, state = nnx.split(model)
    (image, ids, valid), state = _place((image, ids, valid), state)
    logits, cache = _prefill_jit(graphdef, state, image, ids, valid, max_new=max_new_tokens)
    consts = (
        _key(rng),
        jnp.float32(temperature if method == "sample" else 1.0),
        jnp.int32(top_k),
        jnp.float32(top_p),
        jnp.int32(eos_id),
        jnp.int32(pad_id),
    )
    tokens, scores = _loop_jit(
        graphdef,
        state,
        logits,
        cache,
        valid,
        consts,
        max_new=max_new_tokens,
        method=method,
        num_beams=num_beams,
        filtered=method == "sample" and (top_k > 0 or top_p < 1),
        length_penalty=float(length_penalty),
        early_stopping=early_stopping,
    )
    return np.asarray(tokens), np.asarray(scores)


def generate(
    model: PaliGemma,
    pixel_values,
    input_ids,
    attention_mask,
    *,
    max_new_tokens: int,
    method: str = "greedy",
    num_beams: int = 1,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    eos_id: int = 1,
    pad_id: int = 0,
    rng=None,
) -> np.ndarray:
    """New tokens `[B, max_new_tokens]` int32 (EOS kept, `pad_id` after it) of a PaliGemma for
    a batch laid out as `PaliGemmaProcessor` returns it (left or right padded); `method`
    "greedy", "beam" (`num_beams`, HF's defaults) or "sample" (`temperature`, `top_k`, `top_p`,
    `rng`). See the module docstring."""
    tokens, _ = decode(
        model,
        pixel_values,
        input_ids,
        attention_mask,
        max_new_tokens=max_new_tokens,
        method=method,
        num_beams=num_beams,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        eos_id=eos_id,
        pad_id=pad_id,
        rng=rng,
    )
    return tokens

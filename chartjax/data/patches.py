"""Pix2Struct variable-resolution patches as TensorFlow ops (eager or inside tf.data).

Follows pix2struct `preprocessors.py` (models.md §1.4): per-image standardization at the original
resolution, grid `rows = max(min(floor(scale*H/ph), max_patches), 1)` with
`scale = sqrt(max_patches * ph/H * pw/W)` computed in float32 as the official code does (HF uses
float64 and so differs at a few sizes, e.g. 41x41 at 16 patches), antialiased bilinear resize to
exactly `(rows*ph, cols*pw)`, non-overlapping patches flattened in (ph, pw, C) order, row-major,
1-based row/col ids in the first two channels, zero padding to `max_patches` rows.

Speed (each TF op is one pass over the image; TF does not fuse them): standardization reads the
image 4 times instead of 6, patches are cut by a reshape/transpose rather than `extract_patches`,
and an upscale skips the antialiasing kernel, which only differs from plain bilinear when
shrinking.
"""

from __future__ import annotations

import tensorflow as tf


def standardize(image: tf.Tensor) -> tf.Tensor:
    """`tf.image.per_image_standardization` on 0-255 values: (x - mean) / max(std, 1/sqrt(N)).

    Written as centre, norm, divide: the centred image is needed anyway and
    `reduce_euclidean_norm` squares and sums in one pass, so this reads the image 4 times where
    TF's version (moments, then the affine) reads it 6; same population std, to float32 rounding.
    """
    x = tf.cast(image, tf.float32)
    centred = x - tf.reduce_mean(x)
    # max(norm/sqrt(N), 1/sqrt(N)) = max(norm, 1)/sqrt(N)
    std = tf.maximum(tf.math.reduce_euclidean_norm(centred), 1.0) * tf.math.rsqrt(
        tf.cast(tf.size(x), tf.float32)
    )
    return centred / std


def patch_grid(height, width, max_patches: int, patch_size=(16, 16)) -> tuple[tf.Tensor, tf.Tensor]:
    """(rows, cols) int32 of the patch grid for an image of `height` x `width` (float32 math)."""
    ph, pw = patch_size
    h = tf.cast(height, tf.float32)
    w = tf.cast(width, tf.float32)
    mp = tf.constant(max_patches, tf.float32)
    scale = tf.sqrt(mp * (ph / h) * (pw / w))
    rows = tf.maximum(tf.minimum(tf.floor(scale * h / ph), mp), 1.0)
    cols = tf.maximum(tf.minimum(tf.floor(scale * w / pw), mp), 1.0)
    return tf.cast(rows, tf.int32), tf.cast(cols, tf.int32)


def resize_antialiased(image: tf.Tensor, size: tf.Tensor) -> tf.Tensor:
    """`tf.image.resize(bilinear, antialias=True)`, with plain bilinear when no side shrinks.

    When upscaling, TF's antialiased kernel is the triangle of radius 1 on half-pixel centres,
    renormalized at the border, which is what clamped bilinear computes; the two differ only in
    float32 rounding of the sample positions (below 3e-4 on standardized values, tested).
    """
    shape = tf.shape(image)
    grows = tf.logical_and(size[0] >= shape[0], size[1] >= shape[1])
    return tf.cond(
        grows,
        lambda: tf.image.resize(image, size, method="bilinear", antialias=False),
        lambda: tf.image.resize(image, size, method="bilinear", antialias=True),
    )


def image_to_patches(
    image: tf.Tensor,
    max_patches: int,
    patch_size: tuple[int, int] = (16, 16),
    *,
    max_position_id: int | None = 4096,
) -> tf.Tensor:
    """Standardized `image [H, W, C]` -> float32 `[max_patches, 2 + ph*pw*C]`.

    `max_position_id`: the row/col embedding table size; an id reaching it raises
    (InvalidArgumentError) instead of silently indexing out of range. None disables the check.
    """
    ph, pw = patch_size
    image = tf.convert_to_tensor(image, tf.float32)
    channels = image.shape[-1]
    if channels is None:
        raise ValueError("image_to_patches: the channel count must be static")
    shape = tf.shape(image)
    rows, cols = patch_grid(shape[0], shape[1], max_patches, patch_size)
    if max_position_id is not None:
        tf.debugging.assert_less(
            tf.maximum(rows, cols),
            max_position_id,
            message=f"patch grid needs row/col ids >= {max_position_id} (extreme aspect ratio)",
        )
    resized = resize_antialiased(image, tf.stack([rows * ph, cols * pw]))
    # [rows, ph, cols, pw*C] -> [rows, cols, ph, pw*C]: each patch in (ph, pw, C) order.
    grid = tf.reshape(resized, [rows, ph, cols, pw * channels])
    patches = tf.reshape(tf.transpose(grid, [0, 2, 1, 3]), [rows * cols, ph * pw * channels])
    ids = tf.stack(
        [tf.repeat(tf.range(1, rows + 1), cols), tf.tile(tf.range(1, cols + 1), [rows])], 1
    )
    out = tf.concat([tf.cast(ids, tf.float32), patches], axis=1)
    out = tf.pad(out, [[0, max_patches - rows * cols], [0, 0]])
    return tf.ensure_shape(out, [max_patches, 2 + ph * pw * channels])


def preprocess_image(
    image: tf.Tensor, max_patches: int, patch_size=(16, 16), *, max_position_id: int | None = 4096
) -> tf.Tensor:
    """uint8 or float 0-255 `[H, W, C]` -> Pix2Struct `encoder_input_tokens` for one image."""
    return image_to_patches(
        standardize(image), max_patches, patch_size, max_position_id=max_position_id
    )

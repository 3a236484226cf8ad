"""Pix2Struct variable-resolution patches as TensorFlow ops (eager or inside tf.data).

Follows pix2struct `preprocessors.py` (models.md §1.4): per-image standardization at the original
resolution, grid `rows = max(min(floor(scale*H/ph), max_patches), 1)` with
`scale = sqrt(max_patches * ph/H * pw/W)` computed in float32 as the official code does (HF uses
float64 and so differs at a few sizes, e.g. 41x41 at 16 patches), antialiased bilinear resize to
exactly `(rows*ph, cols*pw)`, non-overlapping patches flattened in (ph, pw, C) order, row-major,
1-based row/col ids in the first two channels, zero padding to `max_patches` rows.
"""

from __future__ import annotations

import tensorflow as tf


def standardize(image: tf.Tensor) -> tf.Tensor:
    """`tf.image.per_image_standardization` on 0-255 values: (x - mean) / max(std, 1/sqrt(N))."""
    return tf.image.per_image_standardization(tf.cast(image, tf.float32))


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
    resized = tf.image.resize(
        image,
        tf.stack([rows * ph, cols * pw]),
        method=tf.image.ResizeMethod.BILINEAR,
        antialias=True,
    )
    patches = tf.image.extract_patches(
        resized[None],
        sizes=[1, ph, pw, 1],
        strides=[1, ph, pw, 1],
        rates=[1, 1, 1, 1],
        padding="SAME",
    )[0]  # [rows, cols, ph*pw*C]
    depth = ph * pw * channels
    patches = tf.reshape(patches, [rows * cols, depth])
    r_ids = tf.reshape(tf.repeat(tf.range(1, rows + 1), cols), [-1, 1])
    c_ids = tf.reshape(tf.tile(tf.range(1, cols + 1), [rows]), [-1, 1])
    if max_position_id is not None:
        tf.debugging.assert_less(
            tf.maximum(rows, cols),
            max_position_id,
            message=f"patch grid needs row/col ids >= {max_position_id} (extreme aspect ratio)",
        )
    out = tf.concat([tf.cast(r_ids, tf.float32), tf.cast(c_ids, tf.float32), patches], axis=1)
    out = tf.pad(out, [[0, max_patches - rows * cols], [0, 0]])
    return tf.ensure_shape(out, [max_patches, 2 + depth])


def preprocess_image(
    image: tf.Tensor, max_patches: int, patch_size=(16, 16), *, max_position_id: int | None = 4096
) -> tf.Tensor:
    """uint8 or float 0-255 `[H, W, C]` -> Pix2Struct `encoder_input_tokens` for one image."""
    return image_to_patches(
        standardize(image), max_patches, patch_size, max_position_id=max_position_id
    )

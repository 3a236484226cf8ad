"""Inference-only tasks for any model: captions of charts, and free text-to-text.

`caption`: an image model's output for the chart alone (no header), e.g. a chart-to-text
fine-tune; `text`: a T5 / Flan-T5 on a prompt built by `--template` over JSONL or TFDS fields.
"""

from __future__ import annotations

from chartjax.tasks.core.task import InferenceSpec

CAPTION = InferenceSpec(
    name="caption", modality="image", default_template="", target_field="caption"
)
TEXT = InferenceSpec(name="text", modality="text", default_template=None)

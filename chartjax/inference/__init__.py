"""Inference: one engine behind `chartjax-infer`, `chartjax.load` and chartjax-eval's decoding.

    settings.py  the typed settings: Settings (featurization, decoding), Prompt, Inputs, Job
    engine.py    Engine: a checkpoint located, configured, loaded over the devices; predicts
    features.py  examples -> model features, outputs -> predictions, per kind of model
    paligemma_features.py  PaliGemma's: the checkpoint's processor, paligemma_decoding.generate
    inputs.py    images, JSONL rows, TFDS splits -> examples with the task's prompt
    job.py       the batch job: every input through the engine into predictions.jsonl
    output.py    where the job writes: streamed rows, resumable progress

Imported lazily (no jax, no TensorFlow until an engine is built).
"""

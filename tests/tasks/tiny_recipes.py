"""The tests' recipe runs at tiny size: the model is the family's gin_configs/sizes/*_tiny.gin,
the one tiny size each family has (runs/smoke.gin uses the same files); here only what these
tests' runs add to it."""

# The tiny models have one layer each way (sizes/*_tiny.gin): tracing, which no compilation cache
# saves, dominates these runs (measured: 2+2 layers cost ~1 min more CPU here). One model per
# family for every recipe (vocab 400, batch 8 for the 8 simulated devices), so the session's
# compilation cache serves later recipes. TINY_LAYERS builds the same model in Python (init
# checkpoints: chartjax.models.tiny with these overrides).
TINY_LAYERS = dict(vocab_size=400, num_encoder_layers=1, num_decoder_layers=1)
P2S_TINY = [
    "include 'sizes/pix2struct_tiny.gin'",
    "Pix2StructConfig.vocab_size = 400",  # the tiny test vocabulary (tests/tasks/conftest.py)
    "Pix2StructConfig.patch_size = 4",
    "Pix2StructConfig.max_position_embeddings = 64",
    "Pix2StructConfig.dtype = 'float32'",
    "Features.max_patches = 64",
    "Features.patch_size = 4",
    "Features.max_position_id = 64",
    "Features.max_target_len = 32",
]
T5_TINY = [
    "include 'sizes/t5_1_1_tiny.gin'",
    "T5Config.vocab_size = 400",  # the tiny test vocabulary (tests/tasks/conftest.py)
    "T5Config.dtype = 'float32'",
    "T5Config.dropout_rate = 0.0",
    "Features.max_input_len = 64",
    "Features.max_target_len = 32",
]
RUN_TINY = [
    "Decoding.max_decode_len = 8",
    "train.global_batch_size = 8",
    "train.eval_batch_size = 8",
    "evaluate.eval_batch_size = 8",
    "train.progress = False",
    "train.num_train_steps = 2",
    "train.eval_every = 0",
    "train.checkpoint_every = 2",
    "train.log_every = 1",
    "train.best_metric = None",
]  # a second save; test_recipe_pipeline checks its name


def recipe_batches(recipe: str, bindings: list[str], task_name: str, split: str):
    """The recipe's task without a model: (task, one training batch, the one eval batch of
    `split`), both of 8 rows; gin is cleared before and after."""
    import gin

    from chartjax import config as config_lib
    from chartjax.data import pipeline
    from chartjax.tasks import catalog

    gin.clear_config()
    config_lib.parse_gin([f"tasks/{recipe}.gin"], bindings)
    try:
        task = catalog.get_task(task_name)
        train_batch = next(pipeline.train_batches(task, 8, 0, 0, 0, 1))
        (batch,) = list(pipeline.eval_batches(task, split, 8, 0, 1))
    finally:
        gin.clear_config()
    return task, train_batch, batch

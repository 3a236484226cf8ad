"""Support code for tests and benchmarks, not the product: nothing under chartjax/ outside this
package imports it (tests/test_import_graph.py).

- tiny_hf.py: tiny HuggingFace checkpoint directories (weights, config.json, the family's own
  tokenizer files) written by chartjax's own HF writers, for parity tests against transformers.
- tiny_paligemma.py: tiny random PaliGemma / PaliGemma 2 folders built and saved by transformers
  itself, and inputs laid out as PaliGemmaProcessor lays them out.
"""

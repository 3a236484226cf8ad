"""The post-LN (BERT-style) family: blocks.py (LayerNorm, biased dense layers, attention, the
post-LN encoder layer, pooler and classifier heads; written once) and the models built from it,
bart.py, deberta.py and tapas.py, each numerically as its HF transformers model.

Their HF name maps (checkpoint tensor names <-> chartjax variable paths) are in interop/:
hf_name_map.py (the machinery the family shares) and hf_bart.py, hf_deberta.py, hf_tapas.py.
They read and write checkpoint files, which models never do, and interop sits above models in
the layer order (docs/design.md §2). The data-to-text models (Chart2text, Field-Infuse) are
built from BART's layers too; they have their own room (models/data_to_text/).
"""

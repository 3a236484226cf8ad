"""Data-to-text transformers over a chart's data records (`DataToTextConfig`): Chart2text
(chart2text.py) and Field-Infuse (field_infuse.py), the records rows of Chart-to-Text's Table 4,
and what they share (record_seq2seq.py). Both are built from BART's post-LN layers
(models/post_ln/)."""

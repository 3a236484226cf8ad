"""Synthetic tasks held in memory, with no corpus and no vocabulary: a yes/no task with
FigureQA's feature shapes (synthetic.py), seq2seq tasks with token-id targets
(seq2seq_synthetic.py) and a PaliGemma prefix-LM task with token-id text (prefix_lm_synthetic.py),
for the train-loop tests, smoke runs and benches."""

"""Synthetic tasks held in memory, with no corpus and no vocabulary: a yes/no task with
FigureQA's feature shapes (synthetic.py) and seq2seq tasks with token-id targets
(seq2seq_synthetic.py), for the train-loop tests and smoke runs."""

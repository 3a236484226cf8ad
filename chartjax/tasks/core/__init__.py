"""What every benchmark's task shares: the contract with the loops (task.py) and the halves of
the task kinds (seq2seq.py, classification.py, text_classification.py), the report views and
the inference-only tasks (free_form.py)."""

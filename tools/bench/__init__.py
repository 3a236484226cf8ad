"""The benchmarks: programs that print one JSON object (docs/design.md §6), never timed tests."""

"""The benchmarks: programs that print one JSON object (DESIGN.md §6), never timed tests."""

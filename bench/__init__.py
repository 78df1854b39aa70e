"""Benchmarks of transformer_core, each writing JSON to bench/results/HARDWARE/ (bench/README.md).

Run them as modules from the repository root, e.g. ``python -m bench.bench_decode --quick``:
they share ``bench.shared_data`` (with the tests), and their fresh-process probes import them
as ``bench.<name>``.
"""

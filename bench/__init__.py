"""Benchmarks of transformer_core, each writing JSON to bench/results/HARDWARE/ (bench/README.md).

Run them as modules from the repository root, e.g. ``python -m bench.bench_decode --quick``
(the GPU-only ones as ``python -m bench.gpu.NAME``). Each is an entry point that imports only
``bench.lib`` (what they share, with the tests: ``bench.lib.shared_data``), never another
bench; their fresh-process probes import ``bench.lib`` modules too.
"""

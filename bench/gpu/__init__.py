"""The GPU-only benchmarks and the drivers that run measurements on a lent GPU machine
(``gpu_run.sh``, ``table4_gpu_sweep.sh`` and its ``table4_sweeps/``), from the repository root:
``python -m bench.gpu.NAME``, ``bench/gpu/gpu_run.sh PART``."""

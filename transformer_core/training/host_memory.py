"""Keeping freed memory in the process, so that a CPU training step does not page-fault.

glibc's malloc hands a block of 32 MB or more to the kernel at ``free`` (it came from its own
``mmap``) and trims the top of the heap when much is free. A training step frees its
activations and the loss's (rows, V) buffers, and the next step asks for the same sizes again:
the kernel then zero-fills every 4 KiB page on first touch. With the two settings below, at
Multi30k's shape on 2 EPYC threads in bf16, the page faults of a step fell from 16,700 to 6,300,
the kernel's CPU time from 30 to 15 ms a step, and the step ran 2% faster, at the same peak RSS
(``python -m bench.bench_host_memory``; docs/bf16.md, "Training kernels on CPUs"). The process
keeps its peak heap instead of giving it back between steps.

Nothing changes in any number the process computes. Other C libraries (musl, macOS) have no
such settings; there, and wherever glibc cannot be loaded, this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util

# mallopt parameters, from glibc's malloc.h
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_NEVER_TRIM = 2**31 - 1  # the largest int: the top of the heap is never given back


def keep_freed_memory() -> bool:
    """Tell glibc's malloc to serve every block from its heap and never trim the heap.

    Returns whether both settings took; False where the C library is not glibc.
    """
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, _NEVER_TRIM))

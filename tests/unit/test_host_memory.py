"""keep_freed_memory: a large block freed stays in the process instead of going back to the kernel
(so the next step's block of that size does not page-fault in again)."""

import platform
import resource
from pathlib import Path

import pytest
import torch

from transformer_core.training.host_memory import keep_freed_memory

BLOCK = 64 << 20  # 64 MiB: past glibc's largest mmap threshold (32 MiB)
STATM = Path("/proc/self/statm")


def resident_bytes() -> int:
    return int(STATM.read_text().split()[1]) * resource.getpagesize()


@pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc" or not STATM.exists(), reason="glibc's malloc on Linux only"
)
def test_a_freed_block_stays_resident():
    assert keep_freed_memory()
    block = torch.empty(BLOCK, dtype=torch.uint8)
    block.fill_(1)  # touch every page
    touched = resident_bytes()
    del block
    freed = resident_bytes()
    # Without the setting glibc maps every block this large afresh and unmaps it at free: the
    # resident size drops by the whole 64 MiB. With it the block stays in the heap (it may even
    # have come from memory an earlier train command in this process freed).
    assert touched - freed < BLOCK // 8

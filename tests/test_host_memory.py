"""keep_freed_memory: a block freed and asked for again does not page-fault back in."""

import platform
import resource

import pytest
import torch

from transformer_core.host_memory import keep_freed_memory

BLOCK = 64 << 20  # 64 MiB: past glibc's largest mmap threshold (32 MiB)
PAGE = resource.getpagesize()


def faults_of_a_fresh_block() -> int:
    """Minor page faults taken to allocate and fill a BLOCK-sized tensor, then free it."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = torch.empty(BLOCK, dtype=torch.uint8)
    block.fill_(1)
    del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc settings only")
def test_a_freed_block_is_served_again_without_page_faults():
    assert keep_freed_memory()
    faults_of_a_fresh_block()  # the heap grows to hold it once
    # Given back to the kernel, the block would fault in every page again (BLOCK / PAGE).
    assert faults_of_a_fresh_block() < BLOCK // PAGE // 10

"""Distributed data parallel the torchrun way.

``torchrun --nproc_per_node N [--nnodes M --rdzv-endpoint HOST:PORT] -m transformer_core train ...``
sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; we read them
and join the process group through ``env://``. Nothing is spawned here and no
port is chosen here: torchrun's rendezvous does that, on one node or many. With
no WORLD_SIZE (or WORLD_SIZE=1) the same code runs as one plain process.

NCCL on GPUs, gloo on CPUs. Initialization and teardown are idempotent: a
process group that already exists is reused and left alone at teardown. Numbers
the host already holds (token counts) are summed over a gloo group in host
memory, so that summing them never waits for the GPU; tensors on the device are
summed where they are (``all_reduce_``), queued behind the work that makes them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from transformer_core.device import choose_attention_backends, resolve_device
from transformer_core.errors import UserError
from transformer_core.settings import AUTO


@dataclass(frozen=True)
class DistContext:
    """Where this process sits: its rank among ``world_size`` and its device."""

    rank: int
    local_rank: int
    world_size: int
    device: torch.device
    owns_group: bool  # we created the process group, so we destroy it
    host_group: Any = None  # gloo group for host numbers when the default group is NCCL

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the only process that writes files and logs."""
        return self.rank == 0


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise UserError(f"environment variable {name}={value!r} is not an integer") from None


def planned_ranks(device_name: str = AUTO) -> tuple[int, torch.device]:
    """The number of ranks torchrun describes and this rank's device, before ``setup`` joins
    them: what a run's ``auto`` settings are decided from."""
    return _env_int("WORLD_SIZE", 1), resolve_device(device_name, _env_int("LOCAL_RANK", 0))


def setup(device_name: str = AUTO) -> DistContext:
    """Join the process group torchrun describes (if any) and pick this rank's device."""
    world_size = _env_int("WORLD_SIZE", 1)
    rank = _env_int("RANK", 0)
    local_rank = _env_int("LOCAL_RANK", 0)
    device = resolve_device(device_name, local_rank)
    choose_attention_backends(device)
    if world_size <= 1:
        return DistContext(0, 0, 1, device, owns_group=False)
    if not dist.is_available():
        raise UserError(f"WORLD_SIZE={world_size} but this torch build has no torch.distributed")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    owns = not dist.is_initialized()
    if owns:
        backend = "nccl" if device.type == "cuda" else "gloo"
        kwargs = {"device_id": device} if device.type == "cuda" else {}
        dist.init_process_group(backend=backend, init_method="env://", **kwargs)
    if dist.get_world_size() != world_size or dist.get_rank() != rank:
        raise UserError(
            f"process group (rank {dist.get_rank()} of {dist.get_world_size()}) does not "
            f"match RANK={rank} WORLD_SIZE={world_size}"
        )
    host_group = dist.new_group(backend="gloo") if dist.get_backend() != "gloo" else None
    return DistContext(rank, local_rank, world_size, device, owns, host_group)


def teardown(ctx: DistContext) -> None:
    """Leave the process group if we created it; safe to call twice."""
    if ctx.owns_group and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_sum(values: list[float], ctx: DistContext) -> list[float]:
    """Sum a few host numbers over all ranks (float64: exact for token counts below 2^53).

    In host memory, over gloo: no device work is waited for.
    """
    if not ctx.distributed:
        return list(values)
    tensor = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=ctx.host_group)
    return tensor.tolist()


def all_reduce_(tensor: torch.Tensor, ctx: DistContext, op: str = "sum") -> torch.Tensor:
    """Sum (or ``op="max"``) ``tensor`` over all ranks, in place on its device; returns it.

    On a GPU the collective is queued like a kernel: the host does not wait for it.
    """
    if ctx.distributed:
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM)
    return tensor


def gather_objects(obj: Any, ctx: DistContext) -> list[Any]:
    """Every rank's ``obj``, in rank order (on every rank)."""
    if not ctx.distributed:
        return [obj]
    gathered: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(gathered, obj)
    return gathered


def barrier(ctx: DistContext) -> None:
    if ctx.distributed:
        dist.barrier()

"""torch.distributed set-up: the process group, the device, the model and the data.

These functions do for a script what Ray Train's ``prepare_model`` and
``prepare_data_loader`` do, reading the ranks that Trainyard (or torchrun) set in the
environment. torch is imported inside them, never when ``trainyard`` is imported, and
they work with torch 1.13 and 2.x, with CUDA or without.
"""

from __future__ import annotations

import datetime
import math
import os
import re
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ._context import _warn_once, get_context

if TYPE_CHECKING:  # only for the annotations; never imported at run time here
    import torch
    from torch.utils.data import DataLoader

__all__ = ["init_process_group", "get_device", "prepare_model", "prepare_data_loader"]

#: Process-group timeout when TRAINYARD_PG_TIMEOUT_SECONDS is unset (torch's own is 30 minutes).
DEFAULT_PG_TIMEOUT = datetime.timedelta(seconds=300)

_init_lock = threading.Lock()


def init_process_group(
    backend: str | None = None, timeout: datetime.timedelta | None = None
) -> None:
    """Initialise torch.distributed's default process group from the environment.

    Does nothing when WORLD_SIZE is unset (a plain ``python3 train.py``) or when the group
    already exists, so it is safe to call more than once. With WORLD_SIZE=1 it still
    initialises a group of one, so collectives work. MASTER_ADDR and MASTER_PORT must be
    set (``env://`` rendezvous), as the launcher does.

    Args:
        backend: "nccl" when CUDA is available, else "gloo", unless given.
        timeout: how long a collective may wait for a peer before failing; by default
            TRAINYARD_PG_TIMEOUT_SECONDS, or 300 seconds, so that a frozen peer fails the
            job in minutes rather than after torch's default of 30.

    With CUDA, ``torch.cuda.set_device`` is first called with this process's GPU (see
    :func:`get_device`). With NCCL on torch 1.x, NCCL_ASYNC_ERROR_HANDLING=1 is set unless
    already chosen, since without it torch 1.x does not enforce the timeout.
    """
    import torch
    import torch.distributed as dist

    if not dist.is_available():
        raise RuntimeError("trainyard: this build of torch has no torch.distributed")
    with _init_lock:
        if dist.is_initialized() or not os.environ.get("WORLD_SIZE"):
            return
        ctx = get_context()
        cuda = torch.cuda.is_available()
        if backend is None:
            backend = "nccl" if cuda else "gloo"
        if timeout is None:
            timeout = _pg_timeout()
        if cuda:
            torch.cuda.set_device(_cuda_index(ctx.local_rank))
        if "nccl" in backend.lower() and _torch_major(torch.__version__) < 2:
            if "TORCH_NCCL_ASYNC_ERROR_HANDLING" not in os.environ:
                os.environ.setdefault("NCCL_ASYNC_ERROR_HANDLING", "1")
        dist.init_process_group(
            backend=backend,
            init_method="env://",
            rank=ctx.rank,
            world_size=ctx.world_size,
            timeout=timeout,
        )


def get_device() -> torch.device:
    """Return this process's device: its own GPU when CUDA is available, else cpu.

    Under Trainyard every process sees the GPUs of all the gang's workers on its machine,
    and TRAINYARD_CUDA_DEVICE says which of them is its own (``cuda:<LOCAL_RANK>`` when each
    process has one GPU). Elsewhere it is ``cuda:<LOCAL_RANK>``, or ``cuda:0`` when the
    process sees a single GPU, whatever the local rank.
    """
    import torch

    if torch.cuda.is_available():
        return torch.device("cuda", _cuda_index(get_context().local_rank))
    return torch.device("cpu")


def prepare_model(
    model: torch.nn.Module, *, ddp_kwargs: Mapping[str, Any] | None = None
) -> torch.nn.Module:
    """Move ``model`` to :func:`get_device` and, in a world of more than one, wrap it in DDP.

    The process group is initialised first if it is not yet (:func:`init_process_group`).
    On CUDA, DistributedDataParallel gets ``device_ids=[<this GPU>]``; ``ddp_kwargs`` (e.g.
    ``{"find_unused_parameters": True}``) are passed on to it. A model that is already
    wrapped is returned as it is.
    """
    from torch.nn.parallel import DistributedDataParallel

    if isinstance(model, DistributedDataParallel):
        return model
    device = get_device()
    model = model.to(device)
    if get_context().world_size <= 1:
        return model
    init_process_group()
    kwargs = dict(ddp_kwargs or {})
    if device.type == "cuda":
        kwargs.setdefault("device_ids", [device.index])
    return DistributedDataParallel(model, **kwargs)


def prepare_data_loader(loader: DataLoader[Any]) -> _DeviceLoader:
    """Shard ``loader`` across the ranks and move its batches to :func:`get_device`.

    In a world of more than one, the DataLoader is rebuilt with a DistributedSampler over
    the same dataset, so that each rank sees its own 1/world_size of it. It keeps
    batch_size, num_workers, collate_fn, pin_memory, drop_last, timeout, worker_init_fn,
    generator, multiprocessing_context, persistent_workers and prefetch_factor; it
    shuffles when the original sampler is a RandomSampler (``shuffle=True``). Loaders over
    an IterableDataset, with a DistributedSampler already, or with a custom batch_sampler
    are kept as they are; another custom sampler is replaced, with a warning.

    The returned wrapper iterates like the loader, with every tensor of each batch (alone
    or in tuples, lists and dicts) moved to the device. Each new iteration calls the
    sampler's ``set_epoch`` with 0, 1, 2, ..., so the shuffle differs from epoch to epoch;
    call ``set_epoch(n)`` on the wrapper to choose the next epoch (after resuming from a
    checkpoint). ``len()`` and the loader's attributes (``dataset``, ``sampler``,
    ``batch_size``, ...) work on it.
    """
    if isinstance(loader, _DeviceLoader):
        return loader
    ctx = get_context()
    if ctx.world_size > 1:
        loader = _distributed_loader(loader, ctx.rank, ctx.world_size)
    return _DeviceLoader(loader, get_device())


class _DeviceLoader:
    """A DataLoader whose batches go to a device, with the sampler's epoch kept for you."""

    def __init__(self, loader: DataLoader[Any], device: torch.device) -> None:
        self.loader = loader
        self.device = device
        self._epoch = 0
        self._non_blocking = bool(getattr(loader, "pin_memory", False)) and device.type == "cuda"

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration epoch ``epoch`` (the ones after it count on from there)."""
        self._epoch = epoch

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        sampler: Any = getattr(self.loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(self._epoch)
        self._epoch += 1
        return self._batches()

    def _batches(self) -> Iterator[Any]:
        import torch

        for batch in self.loader:
            yield _to_device(batch, self.device, self._non_blocking, torch.Tensor)

    def __getattr__(self, name: str) -> Any:
        if name == "loader":  # not set yet (e.g. while unpickling)
            raise AttributeError(name)
        return getattr(self.loader, name)


def _distributed_loader(loader: DataLoader[Any], rank: int, world_size: int) -> DataLoader[Any]:
    """Return ``loader`` rebuilt with a DistributedSampler, or as it is when it cannot be."""
    from torch.utils.data import (
        DataLoader,
        DistributedSampler,
        IterableDataset,
        RandomSampler,
        SequentialSampler,
    )

    if isinstance(loader.dataset, IterableDataset) or isinstance(
        loader.sampler, DistributedSampler
    ):
        return loader
    if loader.batch_size is None:
        _warn_once(
            "batch_sampler",
            "prepare_data_loader: the DataLoader has a custom batch_sampler (or "
            "batch_size=None); it is not sharded across ranks",
        )
        return loader
    if not isinstance(loader.sampler, (RandomSampler, SequentialSampler)):
        _warn_once(
            "sampler",
            f"prepare_data_loader: the DataLoader's {type(loader.sampler).__name__} is "
            "replaced by a DistributedSampler",
        )
    sampler: Any = DistributedSampler(
        loader.dataset,
        num_replicas=world_size,
        rank=rank,
        shuffle=isinstance(loader.sampler, RandomSampler),
    )
    kwargs: dict[str, Any] = dict(
        batch_size=loader.batch_size,
        sampler=sampler,
        num_workers=loader.num_workers,
        collate_fn=loader.collate_fn,
        pin_memory=loader.pin_memory,
        drop_last=loader.drop_last,
        timeout=loader.timeout,
        worker_init_fn=loader.worker_init_fn,
        multiprocessing_context=loader.multiprocessing_context,
        generator=loader.generator,
    )
    if loader.num_workers > 0:
        kwargs["persistent_workers"] = loader.persistent_workers
        kwargs["prefetch_factor"] = loader.prefetch_factor
    return DataLoader(loader.dataset, **kwargs)


def _to_device(obj: Any, device: torch.device, non_blocking: bool, tensor: Any) -> Any:
    """Return ``obj`` with its tensors (alone, or in tuples, lists, dicts) on ``device``."""
    if isinstance(obj, tensor):
        return obj.to(device, non_blocking=non_blocking)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple
        return type(obj)(*(_to_device(x, device, non_blocking, tensor) for x in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_to_device(x, device, non_blocking, tensor) for x in obj)
    if isinstance(obj, dict):
        return {k: _to_device(v, device, non_blocking, tensor) for k, v in obj.items()}
    return obj


def _pg_timeout() -> datetime.timedelta:
    """Return TRAINYARD_PG_TIMEOUT_SECONDS as a timedelta, or :data:`DEFAULT_PG_TIMEOUT`."""
    value = os.environ.get("TRAINYARD_PG_TIMEOUT_SECONDS", "").strip()
    if not value:
        return DEFAULT_PG_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(
            f"trainyard: TRAINYARD_PG_TIMEOUT_SECONDS={value!r} is not a positive number"
        )
    return datetime.timedelta(seconds=seconds)


def _cuda_index(local_rank: int) -> int:
    """Return the CUDA device index of this process, whose local rank is ``local_rank``:
    TRAINYARD_CUDA_DEVICE when the launcher set it to a device this process sees."""
    import torch

    count = torch.cuda.device_count()
    own = os.environ.get("TRAINYARD_CUDA_DEVICE", "").strip()
    if own.isdigit() and int(own) < count:
        return int(own)
    return 0 if count == 1 else local_rank


def _torch_major(version: str) -> int:
    """Return the major version of a torch version string such as "1.13.0a0+git"."""
    match = re.match(r"\d+", version)
    return int(match.group()) if match else 0

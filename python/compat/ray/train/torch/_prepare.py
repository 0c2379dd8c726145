"""prepare_model, prepare_data_loader, get_device: Ray Train's names for trainyard's helpers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trainyard
from trainyard import _dist

if TYPE_CHECKING:
    import torch
    from torch.utils.data import DataLoader

__all__ = ["get_device", "get_devices", "prepare_model", "prepare_data_loader"]


def get_device() -> torch.device:
    """Return this worker's device: its GPU when CUDA is available, else the CPU.

    The gang's devices win: a worker that Trainyard gave a GPU uses it even with
    ``ScalingConfig(use_gpu=False)`` (TorchTrainer.fit() warns about that).
    """
    return trainyard.get_device()


def get_devices() -> list[torch.device]:
    """Return [get_device()]: one device per worker."""
    return [get_device()]


def prepare_model(
    model: torch.nn.Module,
    move_to_device: bool | torch.device = True,
    parallel_strategy: str | None = "ddp",
    parallel_strategy_kwargs: dict[str, Any] | None = None,
    **kwargs: Any,
) -> torch.nn.Module:
    """Move ``model`` to this worker's device and, in a gang of more than one, wrap it in DDP.

    ``parallel_strategy_kwargs`` go to DistributedDataParallel; ``parallel_strategy=None``
    only moves the model. FSDP is not supported yet (a clear error says so).
    """
    if parallel_strategy not in ("ddp", None):
        raise ValueError(
            f"prepare_model(parallel_strategy={parallel_strategy!r}): Trainyard's ray supports "
            "'ddp' and None; wrap the model in FullyShardedDataParallel yourself for FSDP"
        )
    if isinstance(move_to_device, bool):
        device = get_device() if move_to_device else None
    else:
        device = move_to_device
    if parallel_strategy is None or trainyard.get_context().world_size <= 1:
        return model.to(device) if device is not None else model
    if device is not None:
        model = model.to(device)
    return trainyard.prepare_model(model, ddp_kwargs=parallel_strategy_kwargs)


def prepare_data_loader(
    data_loader: DataLoader[Any],
    add_dist_sampler: bool = True,
    move_to_device: bool = True,
    auto_transfer: bool = True,
) -> Any:
    """Shard ``data_loader`` across the gang (a DistributedSampler) and move its batches to the device.

    ``add_dist_sampler=False`` keeps the loader's sampler; ``move_to_device=False`` leaves
    batches where the loader puts them. ``auto_transfer`` (CUDA streams in Ray) is accepted
    and ignored.

    As in Ray, the sampler's epoch is the script's: call ``loader.sampler.set_epoch(epoch)``
    at the start of each epoch (Ray's documented pattern) for a new shuffle each epoch, and
    the epoch of a resumed run's. Without that call every epoch shuffles as epoch 0, as in
    Ray, whose wrapper never calls ``set_epoch`` (``trainyard.prepare_data_loader`` counts
    epochs for you instead).
    """
    ctx = trainyard.get_context()
    loader = data_loader
    if add_dist_sampler and ctx.world_size > 1:
        loader = _dist._distributed_loader(loader, ctx.rank, ctx.world_size)
    if not move_to_device:
        return loader
    return _WrappedDataLoader(loader, get_device())


class _WrappedDataLoader(_dist._DeviceLoader):
    """The device loader, leaving the sampler's epoch to the script, as Ray's
    ``_WrappedDataLoader`` does."""

    def set_epoch(self, epoch: int) -> None:
        """Set the sampler's epoch (the same as ``loader.sampler.set_epoch(epoch)``)."""
        sampler: Any = getattr(self.loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)

    def __iter__(self) -> Any:
        return self._batches()

"""ray.train.torch: TorchTrainer and the torch helpers of Ray Train, run by Trainyard."""

from ._prepare import get_device, get_devices, prepare_data_loader, prepare_model
from ._trainer import TorchConfig, TorchTrainer

__all__ = [
    "TorchConfig",
    "TorchTrainer",
    "get_device",
    "get_devices",
    "prepare_data_loader",
    "prepare_model",
]

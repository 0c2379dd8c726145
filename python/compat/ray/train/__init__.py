"""ray.train: Ray Train's API, run by Trainyard's launcher instead of a Ray cluster.

Covered: :class:`ScalingConfig`, :class:`RunConfig`, :class:`CheckpointConfig`,
:class:`FailureConfig`, :class:`Checkpoint`, :func:`report`, :func:`get_checkpoint`,
:func:`get_context`, :func:`get_preemption_info` and :class:`Result`; the trainer is :class:`ray.train.torch.TorchTrainer`.
Where Ray Train V1 and V2 differ, V2 is followed, and each place says so.
"""

from ._checkpoint import Checkpoint
from ._config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from ._result import Result
from ._session import PreemptionInfo, TrainContext, get_checkpoint, get_context, get_preemption_info, report


class TrainingFailedError(RuntimeError):
    """Ray raises this from fit() when training failed; under Trainyard the gang fails instead."""


__all__ = [
    "Checkpoint",
    "CheckpointConfig",
    "FailureConfig",
    "PreemptionInfo",
    "Result",
    "RunConfig",
    "ScalingConfig",
    "TrainContext",
    "TrainingFailedError",
    "get_checkpoint",
    "get_context",
    "get_preemption_info",
    "report",
]

"""ray.train: Ray Train's API, run by Trainyard's launcher instead of a Ray cluster.

Covered: :class:`ScalingConfig`, :class:`RunConfig`, :class:`CheckpointConfig`,
:class:`FailureConfig`, :class:`Checkpoint`, :func:`report`, :func:`get_checkpoint`,
:func:`get_context`, :func:`get_preemption_info`, :class:`CheckpointUploadMode` and :class:`Result`; the trainer is :class:`ray.train.torch.TorchTrainer`.
Where Ray Train V1 and V2 differ, V2 is followed, and each place says so.
"""

from __future__ import annotations

from ._checkpoint import Checkpoint
from ._config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from ._result import Result
from ._session import CheckpointUploadMode, PreemptionInfo, TrainContext, get_checkpoint, get_context, get_preemption_info, report


class TrainingFailedError(RuntimeError):
    """What fit() raises when the gang it launched failed for good (Ray Train V2's error).

    Its message, as Ray's, names each failed worker's rank and shows its traceback;
    ``worker_failures`` maps those ranks to their exceptions (the worker's own exception
    when it can be pickled, else a RuntimeError that names its type and says its message).
    """

    def __init__(self, error_message: str = "", worker_failures: dict[int, BaseException] | None = None) -> None:
        super().__init__(error_message)
        self._error_message = error_message
        self.worker_failures = dict(worker_failures or {})

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self._error_message, self.worker_failures))


__all__ = [
    "Checkpoint",
    "CheckpointConfig",
    "CheckpointUploadMode",
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

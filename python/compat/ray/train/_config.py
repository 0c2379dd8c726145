"""Ray Train's configuration classes: ScalingConfig, RunConfig, CheckpointConfig, FailureConfig.

They take Ray's arguments and check them as Ray does. Under Trainyard the gang that runs
the training loop is Trainyard's: where it disagrees with these (the number of workers, the
run's folder, the restarts, the checkpoints kept), TorchTrainer.fit() says so and the gang
wins. Arguments that only make sense on a Ray cluster are accepted and ignored.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = ["ScalingConfig", "RunConfig", "CheckpointConfig", "FailureConfig"]


def ignored_options(*configs: Any) -> list[str]:
    """Return ``Class(option=value)`` for each option given a value Trainyard ignores.

    Each config class names its ignored options in ``_IGNORED``; an option still at its
    default is not listed, so a script that does not use one hears nothing of it.
    """
    out = []
    for config in configs:
        if config is None:
            continue
        for f in dataclasses.fields(config):
            if f.name not in getattr(config, "_IGNORED", ()):
                continue
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            value = getattr(config, f.name)
            if value != default:
                out.append(f"{type(config).__name__}({f.name}={value!r})")
    return out


@dataclass
class ScalingConfig:
    """How many training workers, and what each uses.

    Attributes:
        num_workers: the number of workers (processes) of the gang; 1 by default. A
            ``(min, max)`` tuple makes the gang elastic, as in Ray Train V2: it starts with
            max and may go on with as few as min (``trainyard run --workers MIN:MAX``).
        use_gpu: whether each worker gets a GPU.
        resources_per_worker: e.g. ``{"CPU": 4, "GPU": 1}``.
        trainer_resources: Ray Train V1's resources of the trainer actor (ignored; V2
            dropped it).
        placement_strategy, accelerator_type: accepted and ignored.
    """

    num_workers: int | tuple[int, int] = 1
    use_gpu: bool = False
    resources_per_worker: dict[str, float] | None = None
    trainer_resources: dict[str, float] | None = None
    placement_strategy: str = "PACK"
    accelerator_type: str | None = None

    _IGNORED: ClassVar[tuple[str, ...]] = ("trainer_resources", "placement_strategy", "accelerator_type")

    def __post_init__(self) -> None:
        if isinstance(self.num_workers, list):  # a (min, max) read back from JSON
            self.num_workers = tuple(self.num_workers)
        counts = self.num_workers if isinstance(self.num_workers, tuple) else (self.num_workers,)
        if (len(counts) not in (1, 2) or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in counts)
                or counts[0] > counts[-1]):
            raise ValueError(
                f"ScalingConfig(num_workers={self.num_workers!r}): num_workers must be an integer of 1 or more, "
                "or a (min, max) tuple of them with min <= max"
            )
        if self.resources_per_worker is not None and not isinstance(self.resources_per_worker, dict):
            raise ValueError("ScalingConfig: resources_per_worker must be a dict such as {'CPU': 2, 'GPU': 1}")

    @property
    def total_resources(self) -> dict[str, float]:
        """The resources of all workers together, as Ray computes them."""
        per = dict(self.resources_per_worker or {})
        per.setdefault("CPU", 1.0)
        if self.use_gpu:
            per.setdefault("GPU", 1.0)
        return {k: float(v) * self.max_workers for k, v in per.items()}

    @property
    def min_workers(self) -> int:
        """The fewest workers: num_workers, or the min of a (min, max) tuple."""
        return self.num_workers[0] if isinstance(self.num_workers, tuple) else self.num_workers

    @property
    def max_workers(self) -> int:
        """The most workers: num_workers, or the max of a (min, max) tuple."""
        return self.num_workers[1] if isinstance(self.num_workers, tuple) else self.num_workers

    @property
    def gpus_per_worker(self) -> float:
        """GPUs each worker asks for: resources_per_worker["GPU"], else 1 with use_gpu, else 0."""
        per = self.resources_per_worker or {}
        if "GPU" in per:
            return float(per["GPU"])
        return 1.0 if self.use_gpu else 0.0


@dataclass
class CheckpointConfig:
    """Which checkpoints to keep.

    Attributes:
        num_to_keep: how many to keep (None: all).
        checkpoint_score_attribute: the metric that ranks them (None: the most recent win).
        checkpoint_score_order: "max" or "min".
        checkpoint_frequency, checkpoint_at_end: Ray Train V1 options, accepted and ignored.
    """

    num_to_keep: int | None = None
    checkpoint_score_attribute: str | None = None
    checkpoint_score_order: str = "max"
    checkpoint_frequency: int = 0
    checkpoint_at_end: bool | None = None

    _IGNORED: ClassVar[tuple[str, ...]] = ("checkpoint_frequency", "checkpoint_at_end")

    def __post_init__(self) -> None:
        if self.num_to_keep is not None and (not isinstance(self.num_to_keep, int) or self.num_to_keep <= 0):
            raise ValueError(
                f"Received invalid num_to_keep: {self.num_to_keep}. Must be None or an integer >= 1."
            )
        if self.checkpoint_score_order not in ("max", "min"):
            raise ValueError(
                f"checkpoint_score_order must be either \"max\" or \"min\", not {self.checkpoint_score_order!r}"
            )


@dataclass
class FailureConfig:
    """How often the gang is restarted after a failure.

    Attributes:
        max_failures: restarts allowed; 0 (the default) none, -1 unlimited.
        fail_fast: accepted and ignored (Trainyard always stops the whole gang at once).
    """

    max_failures: int = 0
    fail_fast: bool | str = False

    _IGNORED: ClassVar[tuple[str, ...]] = ("fail_fast",)

    def __post_init__(self) -> None:
        if not isinstance(self.max_failures, int) or self.max_failures < -1:
            raise ValueError(
                f"FailureConfig(max_failures={self.max_failures!r}): use -1 (unlimited), 0 or a positive integer"
            )


@dataclass
class RunConfig:
    """Where a run's results go, and how it handles checkpoints and failures.

    Attributes:
        name: the run's (experiment's) name; Trainyard's run name.
        storage_path: the folder that holds runs; Trainyard's storage path.
        checkpoint_config, failure_config: see :class:`CheckpointConfig`, :class:`FailureConfig`.
        storage_filesystem, callbacks, stop, verbose, sync_config, log_to_file, ...:
            accepted and ignored.
    """

    name: str | None = None
    storage_path: str | None = None
    storage_filesystem: Any = None
    failure_config: FailureConfig | None = None
    checkpoint_config: CheckpointConfig | None = None
    callbacks: list[Any] | None = None
    stop: Any = None
    verbose: int | None = None
    sync_config: Any = None
    log_to_file: Any = False
    worker_runtime_env: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _IGNORED: ClassVar[tuple[str, ...]] = (
        "storage_filesystem", "callbacks", "stop", "verbose", "sync_config", "log_to_file", "worker_runtime_env",
    )

    def __post_init__(self) -> None:
        if self.failure_config is None:
            self.failure_config = FailureConfig()
        if self.checkpoint_config is None:
            self.checkpoint_config = CheckpointConfig()

"""Result: what TorchTrainer.fit() returns."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ._checkpoint import Checkpoint

__all__ = ["Result"]


@dataclass
class Result:
    """The outcome of a run.

    Attributes:
        metrics: rank 0's last reported metrics (Ray Train V2: only what the loop reported;
            V1 added keys such as ``training_iteration``, which are left out).
        checkpoint: the latest committed checkpoint, or None.
        path: the run's folder.
        error: None: under Trainyard an error in the loop fails the worker, and the gang
            is restarted or the run fails, as ``trainyard run`` reports.
        best_checkpoints: (checkpoint, metrics reported with it) for each checkpoint this
            run reported that is still kept, oldest first.
        metrics_dataframe: the run's progress.csv as a pandas DataFrame when pandas is
            installed, else None.
    """

    metrics: dict[str, Any] | None
    checkpoint: Checkpoint | None
    path: str
    error: BaseException | None = None
    best_checkpoints: list[tuple[Checkpoint, dict[str, Any]]] = field(default_factory=list)
    metrics_dataframe: Any = None

    @property
    def filesystem(self) -> None:
        """None: the run's folder is on this machine's file system."""
        return None

    @property
    def config(self) -> dict[str, Any] | None:
        """Ray Train V1's trial config; None here."""
        return None

    @classmethod
    def from_path(cls, path: str) -> Result:
        """Return the Result of the run folder ``path``: its latest checkpoint and progress."""
        names = sorted(n for n in os.listdir(path) if n.startswith("checkpoint_"))
        checkpoint = Checkpoint(os.path.join(path, names[-1])) if names else None
        frame = read_progress(path)
        return cls(metrics=None, checkpoint=checkpoint, path=path, metrics_dataframe=frame)

    def __repr__(self) -> str:
        return f"Result(metrics={self.metrics!r}, path={self.path!r}, checkpoint={self.checkpoint!r})"


def read_progress(run_dir: str) -> Any:
    """Return ``<run_dir>/progress.csv`` as a DataFrame, or None without pandas or the file."""
    try:
        import pandas
    except ImportError:
        return None
    path = os.path.join(run_dir, "progress.csv")
    if not os.path.isfile(path):
        return None
    return pandas.read_csv(path)

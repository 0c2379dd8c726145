"""Result: what TorchTrainer.fit() returns."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from typing import Any

from ._checkpoint import Checkpoint

__all__ = ["LocalFileSystem", "Result"]


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
    def filesystem(self) -> Any:
        """The file system that holds ``path``: this machine's, as Ray's local case.

        ``pyarrow.fs.LocalFileSystem()`` when pyarrow is installed (what Ray returns), else
        :class:`LocalFileSystem`, a small stand-in with the same ``type_name`` and stream
        methods.
        """
        try:
            import pyarrow.fs
        except ImportError:
            return LocalFileSystem()
        return pyarrow.fs.LocalFileSystem()

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
        """Ray's repr: one attribute a line (error only when there is one, by its type)."""
        shown: dict[str, Any] = {}
        if self.error:
            shown["error"] = type(self.error).__name__
        shown["metrics"] = self.metrics
        shown["path"] = self.path
        shown["filesystem"] = LocalFileSystem.type_name
        shown["checkpoint"] = self.checkpoint
        lines = ",\n".join(f"  {key}={value!r}" for key, value in shown.items())
        return f"{type(self).__name__}(\n{lines}\n)"


class LocalFileSystem:
    """This machine's file system, as the few calls of ``pyarrow.fs.LocalFileSystem`` that
    read and write a run's files need them (Result.filesystem without pyarrow)."""

    #: pyarrow's name for the local file system.
    type_name = "local"

    def open_input_stream(self, path: str) -> io.FileIO:
        """Open path to read (``read()``, ``readall()``)."""
        return io.FileIO(path, "r")

    def open_input_file(self, path: str) -> io.FileIO:
        """Open path to read, with ``seek()``."""
        return io.FileIO(path, "r")

    def open_output_stream(self, path: str) -> io.FileIO:
        """Open path to write, truncating it."""
        return io.FileIO(path, "w")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalFileSystem)

    def __hash__(self) -> int:
        return hash(LocalFileSystem)

    def __repr__(self) -> str:
        return "LocalFileSystem()"


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

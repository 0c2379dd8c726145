"""Checkpoint: a folder of files that a training loop reports, and resumes from."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["Checkpoint"]

_METADATA = ".metadata.json"


class Checkpoint:
    """A checkpoint: a folder on this machine's file system (Ray's local-filesystem case).

    A checkpoint handed to :func:`ray.train.report` on rank 0 is committed into the run's
    folder by Trainyard. Unlike Ray, which copies it, Trainyard moves its files there
    (constant time) and leaves the folder empty, so write a fresh folder for each report.
    """

    def __init__(self, path: str | os.PathLike[str], filesystem: Any = None) -> None:
        if filesystem is not None:
            raise ValueError(
                "Checkpoint(filesystem=...): Trainyard's ray handles local folders only; "
                "pass a local path (a mounted volume works)"
            )
        self.path = os.path.abspath(os.fspath(path))
        self.filesystem = None

    @classmethod
    def from_directory(cls, path: str | os.PathLike[str]) -> Checkpoint:
        """Return a checkpoint of the folder ``path`` (its files are not copied)."""
        return cls(path)

    def to_directory(self, path: str | os.PathLike[str] | None = None) -> str:
        """Copy the checkpoint's files into ``path`` (a new temporary folder when None); return it."""
        source = self._wait()
        target = os.fspath(path) if path is not None else tempfile.mkdtemp(prefix="checkpoint-")
        shutil.copytree(source, target, dirs_exist_ok=True)
        return target

    @contextlib.contextmanager
    def as_directory(self) -> Iterator[str]:
        """Give the checkpoint's folder itself, to read (local, so nothing is copied)."""
        yield self._wait()

    def get_metadata(self) -> dict[str, Any]:
        """Return the metadata stored with the checkpoint ({} when none)."""
        try:
            with open(os.path.join(self._wait(), _METADATA), encoding="utf-8") as f:
                return dict(json.load(f))
        except FileNotFoundError:
            return {}

    def set_metadata(self, metadata: dict[str, Any]) -> None:
        """Store ``metadata`` (JSON) with the checkpoint, replacing what was there."""
        with open(os.path.join(self.path, _METADATA), "w", encoding="utf-8") as f:
            json.dump(metadata, f)

    def update_metadata(self, metadata: dict[str, Any]) -> None:
        """Add ``metadata`` to what is stored with the checkpoint."""
        merged = self.get_metadata()
        merged.update(metadata)
        self.set_metadata(merged)

    def _wait(self, timeout: float = 600.0) -> str:
        """Return the path once the folder exists.

        A checkpoint that fit() returned may still be being committed in the background
        when fit() returns; its folder appears, whole, when the commit is done.
        """
        deadline = time.monotonic() + timeout
        while not os.path.isdir(self.path):
            if time.monotonic() > deadline:
                raise FileNotFoundError(f"checkpoint {self.path} does not exist")
            time.sleep(0.05)
        return self.path

    def __fspath__(self) -> str:
        return self.path

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Checkpoint) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        return f"Checkpoint(filesystem=local, path={self.path})"

"""Checkpoint folders: where to write a new one, and where the latest committed one is.

A checkpoint is a folder of files. Write it into :func:`new_checkpoint_dir`, then hand it
to :func:`trainyard.report`; the launcher commits rank 0's by renaming it into the run's
folder (cheap, as the scratch folder lies beside it). After a restart,
:func:`get_checkpoint` gives the latest committed one (TRAINYARD_CHECKPOINT).
"""

from __future__ import annotations

import os
import secrets
import tempfile
import time

from ._context import _warn_once, get_context

__all__ = ["new_checkpoint_dir", "get_checkpoint"]


def new_checkpoint_dir() -> str:
    """Create and return a fresh, empty, uniquely named folder to write a checkpoint into.

    It is made under TRAINYARD_SCRATCH_DIR, else under
    ``<TRAINYARD_RUN_DIR>/.scratch/rank-<RANK>/``, else (outside Trainyard) it is a
    ``tempfile.mkdtemp()``. The returned path is absolute.
    """
    base = os.environ.get("TRAINYARD_SCRATCH_DIR")
    if not base:
        ctx = get_context()
        if not ctx.run_dir:
            return os.path.abspath(tempfile.mkdtemp(prefix="trainyard-checkpoint-"))
        base = os.path.join(ctx.run_dir, ".scratch", f"rank-{ctx.rank}")
    base = os.path.abspath(base)
    os.makedirs(base, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    while True:
        path = os.path.join(base, f"checkpoint-{stamp}-{secrets.token_hex(4)}")
        try:
            os.mkdir(path)  # mode 0o777 & ~umask, like any folder the user makes
        except FileExistsError:
            continue
        return path


def get_checkpoint() -> str | None:
    """Return the latest committed checkpoint folder to resume from, or None.

    That is TRAINYARD_CHECKPOINT when it is set and the folder exists; None in a run's
    first attempt before any checkpoint, and outside Trainyard.
    """
    path = os.environ.get("TRAINYARD_CHECKPOINT")
    if not path:
        return None
    if not os.path.isdir(path):
        _warn_once(
            "missing-checkpoint",
            f"TRAINYARD_CHECKPOINT={path} is not a folder; starting without a checkpoint",
        )
        return None
    return path

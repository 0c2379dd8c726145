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

from . import _rundir
from ._context import _warn_once, get_context

__all__ = ["new_checkpoint_dir", "get_checkpoint"]


def new_checkpoint_dir() -> str:
    """Create and return a fresh, empty, uniquely named folder to write a checkpoint into.

    It is made under TRAINYARD_SCRATCH_DIR, else under
    ``<TRAINYARD_RUN_DIR>/.scratch/rank-<RANK>/``, else (outside Trainyard) it is a
    ``tempfile.mkdtemp()``. The returned path is absolute.

    In the run folder, it first checks that the run folder is still the one the launcher
    opened and that the scratch folders are real folders of this user
    (:class:`RunFolderError` otherwise).
    """
    base = os.environ.get("TRAINYARD_SCRATCH_DIR")
    if base:
        base = os.path.abspath(base)
        os.makedirs(base, exist_ok=True)
        return _unique(base, None)
    ctx = get_context()
    if not ctx.run_dir:
        return os.path.abspath(tempfile.mkdtemp(prefix="trainyard-checkpoint-"))
    run_dir = os.path.abspath(ctx.run_dir)
    fds = [_rundir.open_run_dir(run_dir)]
    try:
        path = run_dir
        # as private as the run folder (0700, or 0750 when shared with a group)
        mode = (os.fstat(fds[0]).st_mode & 0o750) | 0o700
        for name in (".scratch", f"rank-{ctx.rank}"):
            path = os.path.join(path, name)
            fds.append(_rundir.open_private(fds[-1], name, path, mode))
        return _unique(path, fds[-1], mode)
    finally:
        for fd in fds:
            os.close(fd)


def _unique(base: str, base_fd: int | None, mode: int = 0o777) -> str:
    """Make a new folder in base (reached through base_fd when given) and return its path.

    Its mode is mode & ~umask: 0o777, like any folder the user makes, outside a run folder;
    the run folder's own inside one.
    """
    stamp = time.strftime("%Y%m%d-%H%M%S")
    while True:
        name = f"checkpoint-{stamp}-{secrets.token_hex(4)}"
        try:
            if base_fd is None:
                os.mkdir(os.path.join(base, name), mode)
            else:
                os.mkdir(name, mode, dir_fd=base_fd)
        except FileExistsError:
            continue
        return os.path.join(base, name)


def get_checkpoint() -> str | None:
    """Return the latest committed checkpoint folder to resume from, or None.

    That is TRAINYARD_CHECKPOINT when it is set and the folder exists; None in a run's
    first attempt before any checkpoint, and outside Trainyard. A checkpoint in the run
    folder is handed out only while the run folder is the one the launcher opened, and
    only when it is a real folder of this user: otherwise :class:`RunFolderError`, as
    loading it (torch.load unpickles) would run what someone else put there.
    """
    path = os.environ.get("TRAINYARD_CHECKPOINT")
    if not path:
        return None
    run_dir = get_context().run_dir
    if run_dir and _rundir.inside(path, run_dir):
        _rundir.check_run_dir(os.path.abspath(run_dir))
    if not _rundir.check_own_folder(path):
        _warn_once(
            "missing-checkpoint",
            f"TRAINYARD_CHECKPOINT={path} is not a folder; starting without a checkpoint",
        )
        return None
    return path

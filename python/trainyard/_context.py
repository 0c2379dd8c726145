"""Where this process stands in the job: its ranks and the run it belongs to.

Trainyard's launcher sets these environment variables for every worker process
(the first seven exactly as torchrun does)::

    RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
    MASTER_ADDR, MASTER_PORT,
    TRAINYARD_RUN_NAME, TRAINYARD_STORAGE_PATH, TRAINYARD_RUN_DIR,
    TRAINYARD_ATTEMPT (1-based)

and, for an elastic gang (``--workers MIN:MAX``), TRAINYARD_MIN_WORKERS,
TRAINYARD_MAX_WORKERS and, when the gang was resized since the previous attempt,
TRAINYARD_PREVIOUS_WORLD_SIZE.

Without them (plain ``python3 train.py``) the process is rank 0 of a world of 1.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass

__all__ = ["Context", "get_context"]


@dataclass(frozen=True)
class Context:
    """This process's place in the job.

    Attributes:
        rank: global rank, 0 .. world_size-1.
        local_rank: index among the job's processes on this machine (torchrun's node: all
            of ``trainyard run``'s gang, or one pod on Kubernetes); with one GPU per
            process, also the index of its GPU.
        world_size: number of processes in the job.
        local_world_size: number of the job's processes on this machine.
        node_rank: index of this machine among the job's (torchrun's GROUP_RANK).
        run_name: the run's name, or None when not started by Trainyard.
        storage_path: the folder holding all runs, or None.
        run_dir: this run's folder (logs, checkpoints), or None.
        attempt: 1 for the first start of the gang, 2 after the first restart, ...
        min_workers, max_workers: the fewest and the most workers of an elastic gang
            (``--workers MIN:MAX``); both None for a gang of a fixed size.
        previous_world_size: the world size of the previous attempt when the gang was
            resized since (a worker dropped), else None: adjust what depends on the world
            size (the per-rank batch for a fixed global batch; DistributedSampler
            re-shards by itself).
    """

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    node_rank: int = 0
    run_name: str | None = None
    storage_path: str | None = None
    run_dir: str | None = None
    attempt: int = 1
    min_workers: int | None = None
    max_workers: int | None = None
    previous_world_size: int | None = None


def get_context() -> Context:
    """Return this process's :class:`Context`, read from the environment.

    Reads the environment on every call, so it is cheap but always current.

    Raises:
        ValueError: a variable that must be an integer is not one.
    """
    return Context(
        rank=_env_int("RANK", 0),
        local_rank=_env_int("LOCAL_RANK", 0),
        world_size=_env_int("WORLD_SIZE", 1),
        local_world_size=_env_int("LOCAL_WORLD_SIZE", 1),
        node_rank=_env_int("GROUP_RANK", 0),
        run_name=_env_str("TRAINYARD_RUN_NAME"),
        storage_path=_env_str("TRAINYARD_STORAGE_PATH"),
        run_dir=_env_str("TRAINYARD_RUN_DIR"),
        attempt=_env_int("TRAINYARD_ATTEMPT", 1),
        min_workers=_env_opt_int("TRAINYARD_MIN_WORKERS"),
        max_workers=_env_opt_int("TRAINYARD_MAX_WORKERS"),
        previous_world_size=_env_opt_int("TRAINYARD_PREVIOUS_WORLD_SIZE"),
    )


def _env_opt_int(name: str) -> int | None:
    """Return the variable ``name`` as an int, or None when unset or empty."""
    if not os.environ.get(name, "").strip():
        return None
    return _env_int(name, 0)


def _env_str(name: str) -> str | None:
    """Return the variable ``name``, or None when it is unset or empty."""
    value = os.environ.get(name, "")
    return value or None


def _env_int(name: str, default: int) -> int:
    """Return the variable ``name`` as an int, or ``default`` when unset or empty."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"trainyard: {name}={value!r} is not an integer") from None


_warned: set[str] = set()
_warned_lock = threading.Lock()


def _warn_once(key: str, message: str) -> None:
    """Write ``trainyard: <message>`` to stderr, only the first time ``key`` is seen."""
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    print(f"trainyard: {message}", file=sys.stderr, flush=True)

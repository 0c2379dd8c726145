"""Where this process stands in the job: its ranks and the run it belongs to.

Trainyard's launcher sets these environment variables for every worker process
(the first seven exactly as torchrun does)::

    RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
    MASTER_ADDR, MASTER_PORT,
    TRAINYARD_RUN_NAME, TRAINYARD_STORAGE_PATH, TRAINYARD_RUN_DIR,
    TRAINYARD_ATTEMPT (1-based)

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
        local_rank: rank on this worker (node), also the index of its GPU.
        world_size: number of processes in the job.
        local_world_size: number of processes on this worker.
        node_rank: index of this worker (torchrun's GROUP_RANK).
        run_name: the run's name, or None when not started by Trainyard.
        storage_path: the folder holding all runs, or None.
        run_dir: this run's folder (logs, checkpoints), or None.
        attempt: 1 for the first start of the gang, 2 after the first restart, ...
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
    )


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

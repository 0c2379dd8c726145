"""What TorchTrainer.restore() reloads: the trainer's configuration, saved with its run.

Ray's fit() pickles the trainer's arguments into the experiment folder (``trainer.pkl``)
and ``restore(path)`` builds the trainer again from them, so the restored run keeps its
RunConfig (its CheckpointConfig and FailureConfig) and its scaling, loop config and
torch config; the caller may give again ``train_loop_per_worker``, ``train_loop_config``
and ``scaling_config`` (and datasets). Trainyard writes the same arguments as JSON into
``<run folder>/ray-trainer.json`` (rank 0 of each fit(), before the loop runs, so a run
stopped half way has it): data only, so reading it runs no code. The loop is saved by
name (module and qualified name), found again only in a module already imported (the
script that calls restore()), never imported for it. A ``train_loop_config`` that JSON
cannot hold as it is is not saved: restore() then asks for it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

__all__ = ["FILE", "save", "load", "find_loop"]

#: The file in the run folder that holds the trainer's configuration.
FILE = "ray-trainer.json"

#: The version of the file's format.
VERSION = 1


def _fields(config: Any) -> dict[str, Any]:
    """Return a config dataclass's fields as a dict (None stays None)."""
    return dataclasses.asdict(config) if config is not None else None


def _as_json(value: Any) -> tuple[bool, Any]:
    """Return (True, value) when JSON holds value as it is, else (False, None)."""
    try:
        return json.loads(json.dumps(value)) == value, value
    except (TypeError, ValueError):
        return False, None


def describe(trainer: Any) -> dict[str, Any]:
    """Return what restore() needs of the trainer, as JSON data."""
    loop = trainer.train_loop_per_worker
    module = getattr(loop, "__module__", None)  # a driver's loop keeps its own in the workers
    saved, config = _as_json(trainer.train_loop_config)
    _, metadata = _as_json(trainer.metadata)
    rc = trainer.run_config
    resume = trainer.resume_from_checkpoint
    return {
        "version": VERSION,
        "trainer": type(trainer).__name__,
        "loop": {"module": module, "qualname": getattr(loop, "__qualname__", None)},
        "train_loop_config_saved": saved,
        "train_loop_config": config,
        "scaling_config": _fields(trainer.scaling_config),
        "run_config": {
            "checkpoint_config": _fields(rc.checkpoint_config),
            "failure_config": _fields(rc.failure_config),
        },
        "torch_config": _fields(trainer.torch_config),
        "resume_from_checkpoint": resume.path if resume is not None else None,
        "metadata": metadata or {},
    }


def save(trainer: Any, run_dir: str) -> None:
    """Write the trainer's configuration into the run folder run_dir (atomically, never
    through a symbolic link)."""
    from trainyard import _rundir  # pylint: disable=import-outside-toplevel

    data = json.dumps(describe(trainer), indent=1, sort_keys=True) + "\n"
    dir_fd = _rundir.open_run_dir(run_dir)
    try:
        tmp = f".{FILE}.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data)
        os.replace(tmp, FILE, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def load(path: str) -> dict[str, Any] | None:
    """Return the configuration saved in the run folder path, or None for a run without
    one (a run of an older Trainyard, or of a script that did not use TorchTrainer)."""
    try:
        with open(os.path.join(path, FILE), encoding="utf-8") as f:
            saved = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ValueError(f"TorchTrainer.restore({path!r}): cannot read {FILE}: {e}") from None
    if not isinstance(saved, dict) or saved.get("version") != VERSION:
        raise ValueError(
            f"TorchTrainer.restore({path!r}): {FILE} is not in the format this Trainyard writes (version {VERSION})"
        )
    return saved


def build(cls: type, fields: dict[str, Any] | None) -> Any:
    """Return cls(**fields), keeping only the fields cls has; None for None."""
    if fields is None:
        return None
    known = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in fields.items() if k in known})


def find_loop(saved: dict[str, Any]) -> Any:
    """Return the saved loop from a module already imported, or None."""
    import sys  # pylint: disable=import-outside-toplevel

    loop = saved.get("loop") or {}
    module, qualname = loop.get("module"), loop.get("qualname")
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    obj = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj if callable(obj) else None

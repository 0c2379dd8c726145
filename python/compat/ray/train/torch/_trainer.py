"""TorchTrainer: runs ``train_loop_per_worker`` on every worker of a Trainyard gang.

How fit() runs, in this version:

- Inside a gang (``trainyard run --workers N``, or a Trainyard pod on Kubernetes: WORLD_SIZE
  is more than 1), each worker's fit() runs the loop in its own process: it initialises
  torch.distributed, calls ``train_loop_per_worker(config)`` and returns a Result. When the
  gang's size differs from ``ScalingConfig.num_workers``, the gang wins and fit() says so;
  likewise for the run's name and folder, and for the restarts.
- In a plain single process of ``trainyard run -- python3 train.py`` (no ``--workers``, no
  job file: TRAINYARD_GANG=implicit), a ScalingConfig of more than one worker, or with
  GPUs, makes the script the driver: fit() launches that gang with ``trainyard run`` and
  waits for it (see ``ray.train._driver``). The workers get the loop pickled by value
  and never run the script: its top level runs once, in the driver, as in Ray.
- Otherwise in a single process (or with no Trainyard at all), a ScalingConfig of one
  worker runs the loop in this process, as a gang of one; more workers are an error that
  says to start the script with ``trainyard run``.

An exception in the loop is not caught: it fails this worker, so Trainyard stops the gang
and restarts it from the latest checkpoint while restarts are left. In a gang a driver's
fit() launched, the worker first writes it for the driver, whose fit() raises Ray's
TrainingFailedError with it once the gang fails for good (see ``_driver.failure``).
"""

from __future__ import annotations

import datetime
import inspect
import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trainyard

from .. import _driver, _resources, _restore, _worker
from .._checkpoint import Checkpoint
from .._config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig, ignored_options
from .._output import Printer
from .._result import Result, read_progress
from .._session import Session, _open, _warn

__all__ = ["TorchConfig", "TorchTrainer"]


def _leave_process_group() -> None:
    """Destroy the process group once the loop has ended, as Ray's TorchConfig does when
    training ends. A gloo group left to the interpreter's exit can abort the process
    ("terminate called without an active exception") when a peer has already exited."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


@dataclass
class TorchConfig:
    """How torch.distributed is set up.

    Attributes:
        backend: "nccl", "gloo", ...; None chooses nccl with CUDA, else gloo (as Ray does).
        init_method: accepted for Ray's sake; Trainyard always uses "env".
        timeout_s: how long a collective may wait for a peer (Ray's default: 1800).
    """

    backend: str | None = None
    init_method: str = "env"
    timeout_s: int = 1800


class TorchTrainer:
    """Ray Train's TorchTrainer, run by Trainyard (see the module's notes on fit())."""

    def __init__(
        self,
        train_loop_per_worker: Callable[..., Any],
        *,
        train_loop_config: dict[str, Any] | None = None,
        torch_config: TorchConfig | None = None,
        scaling_config: ScalingConfig | None = None,
        run_config: RunConfig | None = None,
        datasets: dict[str, Any] | None = None,
        dataset_config: Any = None,
        resume_from_checkpoint: Checkpoint | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        if not callable(train_loop_per_worker):
            raise TypeError("TorchTrainer: train_loop_per_worker must be a function")
        if datasets:
            raise ValueError(
                "TorchTrainer(datasets=...): Ray Data is not available under Trainyard; "
                "load the data in train_loop_per_worker (a torch DataLoader with prepare_data_loader)"
            )
        self._params = _loop_params(train_loop_per_worker)
        self.train_loop_per_worker = train_loop_per_worker
        self.train_loop_config = train_loop_config
        self.torch_config = torch_config or TorchConfig()
        self.scaling_config = scaling_config or ScalingConfig()
        self.run_config = run_config or RunConfig()
        self.resume_from_checkpoint = resume_from_checkpoint
        self.metadata = metadata or {}

    @classmethod
    def can_restore(cls, path: Any) -> bool:
        """Whether path is the folder of an earlier fit()'s run (<storage_path>/<name>)."""
        return os.path.isfile(os.path.join(os.fspath(path), "run.json"))

    @classmethod
    def restore(
        cls,
        path: Any,
        train_loop_per_worker: Callable[..., Any] | None = None,
        train_loop_config: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> "TorchTrainer":
        """A trainer that continues the run in path from its latest checkpoint when fit.

        As in Ray, the run keeps the configuration its fit() saved (``ray-trainer.json``,
        see ``_restore``): its RunConfig's CheckpointConfig and FailureConfig, its
        scaling, loop and torch configs, its resume_from_checkpoint and metadata; the
        run's name and storage path come from path. The caller may give again
        ``train_loop_per_worker``, ``train_loop_config`` and ``scaling_config`` (and
        ``torch_config``); a ``run_config`` given here is ignored, as Ray continues the
        run with its own. The loop, when not given, is found by its name in the module
        that defined it (the script calling restore()); a run without the saved file
        (an older Trainyard's) needs the loop, and takes its number of workers from the
        run's last attempt.
        """
        path = os.path.abspath(os.fspath(path))
        if not cls.can_restore(path):
            raise ValueError(
                f"TorchTrainer.restore({path!r}): no run there (no run.json); give the folder "
                "<storage_path>/<name> of an earlier fit()"
            )
        saved = _restore.load(path)
        if train_loop_per_worker is None and saved is not None:
            train_loop_per_worker = _restore.find_loop(saved)
        if train_loop_per_worker is None:
            raise ValueError(
                "TorchTrainer.restore(): the run's loop cannot be found by its name here (it is not "
                "defined at the top level of this script); pass train_loop_per_worker= (the original "
                "trainer's loop) and train_loop_config="
            )
        if saved is None:
            return cls._restore_unsaved(path, train_loop_per_worker, train_loop_config, **kwargs)
        if train_loop_config is None:
            if not saved.get("train_loop_config_saved"):
                raise ValueError(
                    "TorchTrainer.restore(): the run's train_loop_config was not saved (JSON cannot hold "
                    "it as it is); pass train_loop_config= (the original trainer's)"
                )
            train_loop_config = saved.get("train_loop_config")
        if kwargs.pop("run_config", None) is not None:
            _warn("TorchTrainer.restore(run_config=...) is ignored: the run continues with its own RunConfig")
        saved_rc = saved.get("run_config") or {}
        run_config = RunConfig(
            name=os.path.basename(path),
            storage_path=os.path.dirname(path),
            checkpoint_config=_restore.build(CheckpointConfig, saved_rc.get("checkpoint_config")),
            failure_config=_restore.build(FailureConfig, saved_rc.get("failure_config")),
        )
        if kwargs.get("scaling_config") is None:
            kwargs["scaling_config"] = _restore.build(ScalingConfig, saved.get("scaling_config"))
        if kwargs.get("torch_config") is None:
            kwargs["torch_config"] = _restore.build(TorchConfig, saved.get("torch_config"))
        if kwargs.get("resume_from_checkpoint") is None and saved.get("resume_from_checkpoint"):
            kwargs["resume_from_checkpoint"] = Checkpoint(saved["resume_from_checkpoint"])
        if kwargs.get("metadata") is None:
            kwargs["metadata"] = saved.get("metadata") or None
        return cls(train_loop_per_worker, train_loop_config=train_loop_config, run_config=run_config, **kwargs)

    @classmethod
    def _restore_unsaved(
        cls, path: str, loop: Callable[..., Any], train_loop_config: dict[str, Any] | None, **kwargs: Any
    ) -> "TorchTrainer":
        """restore() of a run whose configuration was not saved: the caller's, or defaults."""
        run_config = kwargs.pop("run_config", None) or RunConfig()
        run_config.name, run_config.storage_path = os.path.basename(path), os.path.dirname(path)
        if kwargs.get("scaling_config") is None:
            kwargs["scaling_config"] = ScalingConfig(num_workers=_last_world_size(path))
        return cls(loop, train_loop_config=train_loop_config, run_config=run_config, **kwargs)

    def fit(self) -> Result:
        """Run the training loop (on this worker, or in a gang it launches) and return the Result."""
        if not os.environ.get(_worker.RESULT_ENV):  # not a gang its driver's fit() launched
            self._warn_ignored()
        if _driver.is_driver(self.scaling_config):
            return _driver.launch(self)
        if not os.environ.get(_worker.RESULT_ENV):
            _resources.flags(self.scaling_config, _warn)  # a gang here: only say what does not fit
        self._join_gang()
        self._warn_disagreements()
        ctx = trainyard.get_context()
        if ctx.rank == 0 and ctx.run_dir:
            try:
                _restore.save(self, ctx.run_dir)  # what restore() reloads, as Ray's trainer.pkl
            except OSError as e:
                _warn(f"cannot save the trainer's configuration for restore() in {ctx.run_dir}: {e}")
        printer = Printer(enabled=ctx.rank == 0)
        session = Session(experiment_name=self.run_config.name, resume_from=self.resume_from_checkpoint,
                          printer=printer)
        _open(session)
        cfg = self.torch_config
        trainyard.init_process_group(backend=cfg.backend, timeout=datetime.timedelta(seconds=cfg.timeout_s))
        printer.started(self.train_loop_config)
        if self._params == 1:
            config = self.train_loop_config if self.train_loop_config is not None else {}
            self.train_loop_per_worker(config)
        else:
            self.train_loop_per_worker()
        result = _result(session)
        printer.completed()
        _leave_process_group()
        return result

    def _join_gang(self) -> None:
        """Check that this process is in a gang fit() can run in, or make it a gang of one."""
        world = trainyard.get_context().world_size if os.environ.get("WORLD_SIZE") else None
        wanted = self.scaling_config.max_workers
        if world is not None and world > 1:
            return
        if wanted != 1:
            raise RuntimeError(
                f"TorchTrainer.fit(): ScalingConfig(num_workers={wanted}) asks for {wanted} workers, "
                f"but this is a single process. Start the script as a gang of {wanted}: "
                f"trainyard run -- python3 <script> (fit() launches the gang), or "
                f"trainyard run --workers {wanted} -- python3 <script>"
            )
        if world is None:  # not started by Trainyard or torchrun: a world of one
            for name, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"),
                                ("LOCAL_WORLD_SIZE", "1"), ("GROUP_RANK", "0"),
                                ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(_free_port()))):
                os.environ.setdefault(name, value)

    def _warn_ignored(self) -> None:
        """Name the options this trainer was given that only mean something on a Ray cluster."""
        rc = self.run_config
        ignored = ignored_options(self.scaling_config, rc, rc.checkpoint_config, rc.failure_config)
        if ignored:
            _warn(
                "ignored, as they only mean something on a Ray cluster (Trainyard places, restarts "
                "and checkpoints the gang itself): " + ", ".join(ignored)
            )

    def _warn_disagreements(self) -> None:
        """Say plainly where the gang differs from the trainer's configs: the gang wins."""
        ctx = trainyard.get_context()
        sc, rc = self.scaling_config, self.run_config
        if not sc.min_workers <= ctx.world_size <= sc.max_workers:
            _warn(
                f"ScalingConfig(num_workers={sc.num_workers}) differs from this gang of "
                f"{ctx.world_size} worker process(es); the gang wins: training runs on "
                f"{ctx.world_size} (start it with trainyard run --workers {sc.num_workers} to match)"
            )
        if sc.gpus_per_worker > 0 and _visible_gpus() == 0:
            _warn(
                "ScalingConfig asks for a GPU per worker, but this gang's workers have none; "
                "the gang wins: training runs on the CPU (give trainyard run --gpus-per-worker 1)"
            )
        if ctx.run_name and rc.name and rc.name != ctx.run_name:
            _warn(f"RunConfig(name={rc.name!r}) differs from this run's name {ctx.run_name!r}; the run's name wins")
        if ctx.storage_path and rc.storage_path and not _same_path(rc.storage_path, ctx.storage_path):
            _warn(
                f"RunConfig(storage_path={rc.storage_path!r}) differs from this run's storage path "
                f"{ctx.storage_path!r}; the run's wins"
            )
        restarts = os.environ.get("TRAINYARD_MAX_RESTARTS")
        wanted = rc.failure_config.max_failures if rc.failure_config else 0
        unlimited = wanted < 0 and restarts == str(_driver.UNLIMITED_RESTARTS)
        if restarts is not None and wanted != 0 and str(wanted) != restarts and not unlimited:
            _warn(
                f"FailureConfig(max_failures={wanted}) differs from this run's --max-restarts "
                f"{restarts}; the run's wins"
            )
        keep = os.environ.get("TRAINYARD_KEEP_CHECKPOINTS")
        cc = rc.checkpoint_config
        if keep is not None and cc is not None and cc.num_to_keep and str(cc.num_to_keep) != keep:
            kept = "all" if keep == "0" else keep
            _warn(
                f"CheckpointConfig(num_to_keep={cc.num_to_keep}) differs from this run's --keep-checkpoints "
                f"({kept}); the run's wins (start it with trainyard run --keep-checkpoints {cc.num_to_keep} to match)"
            )


def _loop_params(fn: Callable[..., Any]) -> int:
    """Return how many arguments the loop takes (0 or 1), or raise ValueError as Ray does."""
    try:
        n = len(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return 1
    if n > 1:
        raise ValueError(
            f"train_loop_per_worker should take in 0 or 1 arguments, but it accepts {n} arguments instead."
        )
    return n


def _result(session: Session) -> Result:
    """Return the Result of this run, the same on every worker (rank 0's metrics and checkpoints)."""
    trainyard._report._client.flush()  # every report answered: results and checkpoints taken
    metrics, last, kept = _from_rank0(session)
    if trainyard.get_context().rank == 0:
        _worker.write_result((metrics, last, kept))
    run_dir = trainyard.get_context().run_dir or ""
    checkpoint = Checkpoint(os.path.join(run_dir, last)) if last and run_dir else None
    if checkpoint is None:
        resumed = trainyard.get_checkpoint()
        checkpoint = Checkpoint(resumed) if resumed else None
    best = [
        (Checkpoint(os.path.join(run_dir, name)), m)
        for name, m in kept
        if run_dir and (name == last or os.path.isdir(os.path.join(run_dir, name)))
    ]
    return Result(
        metrics=metrics,
        checkpoint=checkpoint,
        path=run_dir,
        best_checkpoints=best,
        metrics_dataframe=read_progress(run_dir) if run_dir else None,
    )


def _from_rank0(session: Session) -> tuple[Any, str | None, list[tuple[str, dict[str, Any]]]]:
    """Return rank 0's (last metrics, last checkpoint name, checkpoints with metrics)."""
    mine = [session.last_metrics, session.last_checkpoint, list(session.checkpoints)]
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.broadcast_object_list(mine, src=0)
    return mine[0], mine[1], mine[2]


def _visible_gpus() -> int:
    """Return how many GPUs this worker sees, without importing torch."""
    from ..._resources import gpu_count

    return gpu_count()


def _same_path(a: str, b: str) -> bool:
    return os.path.realpath(os.path.expanduser(a)) == os.path.realpath(os.path.expanduser(b))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _last_world_size(path: str) -> int:
    """The number of ranks of the run's last attempt, from its run.json (1 if unknown)."""
    try:
        with open(os.path.join(path, "run.json"), encoding="utf-8") as f:
            attempts = json.load(f).get("attempts") or []
        return max(1, len(attempts[-1].get("ranks") or []))
    except (OSError, ValueError, IndexError, AttributeError):
        return 1

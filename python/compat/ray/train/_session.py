"""The training loop's view of its run: report(), get_checkpoint(), get_context().

They delegate to the ``trainyard`` helper, so that metrics reach Trainyard's results and
the ranks' checkpoints are committed by Trainyard's committer. TorchTrainer.fit() opens a
session around ``train_loop_per_worker`` (its config, the checkpoint to resume from, what
the loop reported); outside fit(), they work on the process's run as Trainyard started it.
"""

from __future__ import annotations

import collections
import enum
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import trainyard

from ._checkpoint import Checkpoint
from ._output import Printer

__all__ = ["CheckpointUploadMode", "report", "get_checkpoint", "get_context", "get_preemption_info", "PreemptionInfo",
           "TrainContext"]

#: How many reported checkpoints a session remembers the metrics of (best_checkpoints).
MAX_REMEMBERED = 1000


@dataclass
class Session:
    """What one fit() knows of its loop: set up by the trainer, filled in by report()."""

    experiment_name: str | None = None
    resume_from: Checkpoint | None = None
    last_metrics: dict[str, Any] | None = None
    last_checkpoint: str | None = None  # the committed checkpoint's name in the run folder
    checkpoints: collections.deque[tuple[str, dict[str, Any]]] = field(
        default_factory=lambda: collections.deque(maxlen=MAX_REMEMBERED)
    )
    #: prints Ray's "Training result" table after each report (rank 0 of a fit()); None
    #: outside fit().
    printer: Printer | None = None


_lock = threading.Lock()
_session = Session()


def _open(session: Session) -> None:
    """Make ``session`` the one report() fills in (TorchTrainer.fit calls this)."""
    global _session
    with _lock:
        _session = session


def _current() -> Session:
    with _lock:
        return _session


class CheckpointUploadMode(enum.Enum):
    """How report() waits for a checkpoint to reach the run's storage (Ray Train V2's).

    Where the run is kept in a bucket (``storage_path="s3://..."``), SYNC (the default)
    returns once the checkpoint is committed in the bucket, ASYNC at once, while Trainyard
    uploads it in the background. In a folder, the checkpoint is committed there in the
    background, and all three return at once. NO_UPLOAD is taken as ASYNC: Trainyard keeps
    every checkpoint it is given where the run is kept.
    """

    ASYNC = "ASYNC"
    SYNC = "SYNC"
    NO_UPLOAD = "NO_UPLOAD"


#: How often a SYNC report() looks whether its checkpoint is uploaded.
UPLOAD_POLL_SECONDS = 0.05
#: After how long a SYNC report() says once what it waits for.
UPLOAD_NOTE_SECONDS = 60.0


def report(
    metrics: dict[str, Any],
    checkpoint: Checkpoint | None = None,
    checkpoint_dir_name: str | None = None,
    checkpoint_upload_mode: CheckpointUploadMode | str = CheckpointUploadMode.SYNC,
    **kwargs: Any,
) -> None:
    """Report this step's metrics, and optionally a checkpoint, from every worker.

    Rank 0's metrics are the run's. As in Ray Train 2.7 and later, every worker may pass a
    checkpoint: the files of the workers' checkpoints of the same report are merged into
    one ``checkpoint_NNNNNN`` in the run's folder (see :class:`Checkpoint`), registered once
    every worker has made that report; where two workers wrote the same file, the lowest
    rank's copy is kept (Ray keeps whichever upload came last).
    Metrics that are not numbers (strings, lists, ...) stay in ``Result.metrics`` but are
    not sent to Trainyard's results, which hold numbers. ``checkpoint_dir_name`` (V2) is
    accepted and ignored: Trainyard names checkpoints itself. ``checkpoint_upload_mode``:
    see :class:`CheckpointUploadMode`. Inside fit(), rank 0 prints Ray's "Training result"
    table for each report (see _output).
    """
    mode = CheckpointUploadMode(getattr(checkpoint_upload_mode, "value", checkpoint_upload_mode))
    if not isinstance(metrics, dict):
        raise TypeError(f"ray.train.report: metrics must be a dict, not {type(metrics).__name__}")
    numbers = {k: v for k, v in metrics.items() if _is_number(v)}
    result = trainyard.report(numbers, checkpoint=checkpoint)
    session = _current()
    session.last_metrics = dict(metrics)
    if session.printer is not None:
        run_dir = trainyard.get_context().run_dir
        path = os.path.join(run_dir, result.checkpoint) if run_dir and result.checkpoint else None
        session.printer.reported(result.iteration, metrics, result.checkpoint, path)
    if result.checkpoint is not None:
        session.last_checkpoint = result.checkpoint
        session.checkpoints.append((result.checkpoint, dict(metrics)))
        if checkpoint is not None and mode is CheckpointUploadMode.SYNC:
            _wait_uploaded(result.checkpoint)


def _wait_uploaded(name: str) -> None:
    """Wait until the checkpoint name is committed in the run's bucket, when the run is kept
    in one: the uploader records each upload's end in the run folder's
    ``.trainyard-uploads.json``. A failed upload raises (Ray's SYNC report raises too)."""
    storage = os.environ.get("TRAINYARD_STORAGE_PATH") or ""
    run_dir = trainyard.get_context().run_dir
    if "://" not in storage or not run_dir:
        return
    index = int(name.rsplit("_", 1)[1])
    status = os.path.join(run_dir, ".trainyard-uploads.json")
    start, noted = time.monotonic(), False
    while True:
        try:
            with open(status, encoding="utf-8") as f:
                done = json.load(f)
        except (OSError, ValueError):
            done = {}
        if index in (done.get("failed") or []):
            raise RuntimeError(f"ray.train.report: {name} could not be uploaded to {storage} "
                               "(Trainyard's log says why); the run's latest checkpoint in the bucket is an earlier one")
        if int(done.get("uploaded") or 0) >= index:
            return
        if not noted and time.monotonic() - start > UPLOAD_NOTE_SECONDS:
            noted = True
            print(f"ray.train.report: waiting for {name} to be uploaded to {storage} (checkpoint_upload_mode SYNC; "
                  "ASYNC returns at once)", file=sys.stderr, flush=True)
        time.sleep(UPLOAD_POLL_SECONDS)


def _is_number(value: Any) -> bool:
    """Return whether trainyard.report takes ``value``: a number, or a scalar with .item()."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    item = getattr(value, "item", None)
    if not callable(item):
        return False
    try:
        return _is_number(item())
    except Exception:  # a tensor of several elements
        return False


def get_checkpoint() -> Checkpoint | None:
    """Return the checkpoint to resume from, or None.

    That is the latest committed checkpoint of this run (after a restart, or a second run
    of the same run name), else the trainer's ``resume_from_checkpoint``.
    """
    path = trainyard.get_checkpoint()
    if path is not None:
        return Checkpoint(path)
    return _current().resume_from


@dataclass(frozen=True)
class TrainContext:
    """This worker's place in the run, as Ray Train's ``get_context()`` gives it."""

    _ctx: trainyard.Context
    _experiment: str | None

    def get_world_size(self) -> int:
        """The number of workers in the gang."""
        return self._ctx.world_size

    def get_world_rank(self) -> int:
        """This worker's rank, 0 .. world size - 1."""
        return self._ctx.rank

    def get_local_rank(self) -> int:
        """This worker's rank on its node."""
        return self._ctx.local_rank

    def get_local_world_size(self) -> int:
        """The number of workers on this node."""
        return self._ctx.local_world_size

    def get_node_rank(self) -> int:
        """The index of this worker's node."""
        return self._ctx.node_rank

    def get_experiment_name(self) -> str:
        """The run's name (RunConfig.name; under Trainyard, the run name)."""
        return self._ctx.run_name or self._experiment or ""

    def get_trial_name(self) -> str:
        """Ray Train V1: the trial's name; here the run's name (one trial per run)."""
        return self.get_experiment_name()

    def get_trial_id(self) -> str:
        """Ray Train V1: the trial's id; here the run's name."""
        return self.get_experiment_name()

    def get_trial_dir(self) -> str:
        """Ray Train V1: the trial's folder; here the run's folder."""
        return self._ctx.run_dir or os.getcwd()

    def get_storage_path(self) -> str | None:
        """The folder that holds the runs (RunConfig.storage_path)."""
        return self._ctx.storage_path

    def get_metadata(self) -> dict[str, Any]:
        """Ray Train V1: the trainer's metadata; always {} here."""
        return {}


def get_context() -> TrainContext:
    """Return this worker's :class:`TrainContext`."""
    return TrainContext(trainyard.get_context(), _current().experiment_name)


def _warn(message: str) -> None:
    """Write ``ray.train: <message>`` to stderr (rank 0 only)."""
    if trainyard.get_context().rank == 0:
        print(f"ray.train: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class PreemptionInfo:
    """A pending preemption, as Ray Train's get_preemption_info() gives it (alpha in Ray,
    2026): the ranks it affects (the whole gang: Trainyard preempts gangs), the deadline
    (seconds since the epoch) and the reason."""

    deadline: float
    reason: str
    affected_ranks: list[int] = field(default_factory=list)


def get_preemption_info() -> PreemptionInfo | None:
    """The pending preemption, or None. Report a checkpoint before ``deadline``: it is
    committed before the gang stops, and the run resumes from it (trainyard.preemption())."""
    p = trainyard.preemption_info()
    if p is None:
        return None
    return PreemptionInfo(deadline=p.deadline, reason=p.reason,
                          affected_ranks=list(range(trainyard.get_context().world_size)))

"""Driver mode: fit() in a plain single process launches the gang ScalingConfig asks for.

``trainyard run -- python3 train.py`` (no ``--workers``, no job file) starts the script as
one process that Trainyard marks ``TRAINYARD_GANG=implicit``. There, a fit() that asks for
more than that one process (``num_workers`` above 1, or GPUs) makes the script Ray's
driver: it runs ``trainyard run --workers N ...`` (the same binary, TRAINYARD_BINARY) as a
child, whose output reaches this console, waits for it, and returns the Result of the
gang's run folder.

As in Ray, the workers run ``train_loop_per_worker`` only, never the script: fit()
pickles the loop by value (``_byvalue``: its code, the globals it uses, the functions and
classes of the script it calls), with ``train_loop_config`` and the trainer's configs,
into a private file (0600) of the driver's run folder; each worker runs
``ray.train._worker`` (see WORKER_BOOT), which loads it and calls the loop through the
in-gang fit(). So the script's top level (with or without ``if __name__ ==
"__main__":``) runs once, in the driver, and what follows fit() sees the gang's Result. A
loop that uses something that cannot be pickled (an open file, a lock, a generator) is
refused here, at fit(), with an error naming it.

When the gang fails for good, fit() raises Ray's TrainingFailedError with the exception
and traceback of each worker that failed with one in the last attempt: each writes its own,
before it exits, beside the result file (see ``failure``).

The gang's run is ``RunConfig(storage_path, name)``, by default the driver's storage path
and ``<driver's run name>-train``. Running the script again with the same name continues
that run from its latest checkpoint, even one that succeeded, as Ray Train V2 does
(``trainyard run --resume``, given only when the run's folder exists, since --resume
refuses a run that is not there).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from typing import Any

from . import _resources
from ._checkpoint import Checkpoint
from ._result import Result, read_progress

#: The most restarts -1 (unlimited) becomes: Trainyard's --max-restarts takes a number.
UNLIMITED_RESTARTS = 1_000_000

#: Trainyard's run names: 1 to 45 characters.
MAX_NAME = 45

#: The version of the spec's format (the worker refuses another).
SPEC_VERSION = 2

#: What a worker's Python runs (``python -c WORKER_BOOT <spec>``): ``ray.train._worker``'s
#: main, imported once the working folder is off the front of sys.path. ``python -m`` would
#: put the working folder first, so a ``ray`` package that anyone able to write there
#: created after the driver started (a shared project folder, even a sticky one) would be
#: imported instead of this one and run as the job's user. ``-P`` (PYTHONSAFEPATH) does
#: the same from Python 3.11 on only; this works in every Python. The worker appends the
#: script's folder, the driver's sys.path and the working folder at the end of sys.path
#: instead (see _worker.extend_path), so the loop's own imports still work.
WORKER_BOOT = (
    "import sys; sys.path[:1] = [p for p in sys.path[:1] if p]; "
    "from ray.train._worker import main; sys.exit(main(sys.argv[1:]))"
)


def is_driver(scaling: Any) -> bool:
    """Return whether fit() should launch a gang: an implicit single process asking for more."""
    if os.environ.get("TRAINYARD_GANG") != "implicit" or not os.environ.get("TRAINYARD_BINARY"):
        return False
    return scaling.max_workers > 1 or scaling.gpus_per_worker > 0


def payload(trainer: Any) -> bytes:
    """Return what the workers run, pickled by value: the loop, its config and the
    trainer's configs; raise NotSendable naming the part that cannot be pickled."""
    from . import _byvalue  # pylint: disable=import-outside-toplevel

    parts = {
        "train_loop_per_worker": trainer.train_loop_per_worker,
        "train_loop_config": trainer.train_loop_config,
        "torch_config": trainer.torch_config,
        "scaling_config": trainer.scaling_config,
        "run_config": _sendable_run_config(trainer.run_config),
        "resume_from_checkpoint": trainer.resume_from_checkpoint,
    }
    try:
        return _byvalue.dumps(parts)
    except _byvalue.NotSendable as e:
        where = None
        for name, part in parts.items():
            where = _byvalue.find_unsendable(part, name)
            if where:
                break
        raise _byvalue.NotSendable(
            f"TorchTrainer.fit(): cannot send the training loop to the workers: {where or e}. As in Ray, the "
            "workers get train_loop_per_worker and what it uses (its globals, the functions and classes it "
            "calls, train_loop_config) pickled; they never run the script. Create such an object inside "
            "train_loop_per_worker (each worker its own), or pass what makes it (a path, a number) in "
            "train_loop_config"
        ) from None


def _sendable_run_config(rc: Any) -> Any:
    """Return the RunConfig without the options the workers ignore (callbacks, stop),
    which may hold what cannot be pickled."""
    import dataclasses  # pylint: disable=import-outside-toplevel

    if getattr(rc, "callbacks", None) is None and getattr(rc, "stop", None) is None:
        return rc
    return dataclasses.replace(rc, callbacks=None, stop=None)


def _path_folders() -> list[str]:
    """Return the folders the workers append to sys.path: the script's, those of this
    process's sys.path (absolute; a folder the script put there too), the working folder."""
    folders = []
    if sys.argv and sys.argv[0] and os.path.isfile(sys.argv[0]):
        folders.append(os.path.dirname(os.path.abspath(sys.argv[0])))
    folders += [os.path.abspath(p) for p in sys.path if p and isinstance(p, str)]
    folders.append(os.getcwd())
    return list(dict.fromkeys(folders))


def launch(trainer: Any) -> Result:
    """Run the trainer's loop in a gang started by Trainyard and return the gang's Result."""
    loop = payload(trainer)
    storage, name = _run_place(trainer.run_config)
    folder, folder_fd = _driver_folder()
    try:
        return _launch(trainer, loop, storage, name, folder, folder_fd)
    finally:
        os.close(folder_fd)


def _driver_folder() -> tuple[str, int]:
    """Make and open ``<run folder>/ray-driver`` (0700), through the run folder the launcher
    opened (checked by its device and inode), and return its path and fd."""
    from trainyard import _rundir  # pylint: disable=import-outside-toplevel

    run_dir = os.path.abspath(os.environ.get("TRAINYARD_RUN_DIR") or os.getcwd())
    run_fd = _rundir.open_run_dir(run_dir)
    try:
        folder = os.path.join(run_dir, "ray-driver")
        return folder, _rundir.open_private(run_fd, "ray-driver", folder, 0o700)
    finally:
        os.close(run_fd)


def _launch(trainer: Any, loop: bytes, storage: str, name: str, folder: str, folder_fd: int) -> Result:
    """Write the spec into the driver's folder (folder_fd), run the gang, return its Result."""
    from . import _byvalue  # pylint: disable=import-outside-toplevel

    spec = os.path.join(folder, f"{name}.pkl")
    result_name = f"{name}.result.pkl"
    result_file = os.path.join(folder, result_name)
    _remove(result_name, folder_fd)
    _remove_errors(name, folder_fd)
    _write_private(f"{name}.pkl", folder_fd, {
        "version": SPEC_VERSION,
        "python": _byvalue.python_tag(),
        "executable": sys.executable,
        "payload": loop,
        "path": _path_folders(),
        "argv": list(sys.argv),
        "result_file": result_file,
    })
    flags = command(trainer, storage, name)
    argv = flags + ["--", sys.executable, "-c", WORKER_BOOT, spec]
    shown = ["trainyard"] + flags[1:]  # not the worker's boot code: the loop is Trainyard's to run
    print(f"ray.train: launching a gang of {_workers(trainer.scaling_config)} worker(s) in run {name!r}: "
          f"{' '.join(shown)}", file=sys.stderr, flush=True)
    run_dir = local_run_dir(storage, name)
    _write_gang(run_dir, folder_fd)
    code = subprocess.call(argv, env=_child_env())
    if code != 0:
        raise failure(name, run_dir, code, folder_fd)
    return _result(run_dir, result_name, folder_fd)


def failure(name: str, run_dir: str, code: int, dir_fd: int) -> Exception:
    """Return the TrainingFailedError of the gang's run that failed with exit code code.

    As Ray Train V2's, its message names each worker that failed with an exception in the
    run's last attempt, with its traceback, and ``worker_failures`` holds the exceptions
    (each worker wrote its own beside the result file, see _worker.write_error). A gang
    that failed otherwise (a worker killed, out of memory) says its exit code.
    """
    from ray.train import TrainingFailedError  # pylint: disable=import-outside-toplevel

    where = f"run {name!r}, folder {run_dir}, exit code {code}"
    if code == 2:  # trainyard run's exit code for bad input: nothing was started
        return TrainingFailedError(
            f"TorchTrainer.fit(): Trainyard refused to start the training gang ({where}): its message, "
            "above, says which setting (ScalingConfig, RunConfig) to change"
        )
    records = _worker_errors(name, run_dir, dir_fd)
    if not records:
        return TrainingFailedError(
            f"TorchTrainer.fit(): the training gang ({where}) failed without a Python exception in its "
            "workers (killed, or out of memory?); see its output above"
        )
    failures = {rank: _exception(r) for rank, r in records.items()}
    body = "\n".join(
        f"[Rank {rank}]\n{str(r.get('traceback') or _exception(r)).rstrip()}" for rank, r in records.items()
    )
    return TrainingFailedError(
        "Training failed due to worker errors:\n"
        f"Terminating training worker group after encountering failure(s) on {len(records)} worker(s):\n"
        f"{body}\n(the training gang: {where}; its output is above)",
        failures,
    )


def _worker_errors(name: str, run_dir: str, dir_fd: int) -> dict[int, dict[str, Any]]:
    """Return, by rank, the errors the workers of the run's last attempt wrote."""
    from trainyard import _rundir  # pylint: disable=import-outside-toplevel

    records = []
    for file in _error_files(name, dir_fd):
        try:
            with os.fdopen(_rundir.open_own_file(file, dir_fd), "rb") as f:
                record = pickle.load(f)
        except (OSError, _rundir.RunFolderError, pickle.UnpicklingError, EOFError):
            continue
        if isinstance(record, dict) and isinstance(record.get("rank"), int):
            records.append(record)
    if not records:
        return {}
    last = _last_attempt(run_dir) or max(int(r.get("attempt") or 0) for r in records)
    return {r["rank"]: r for r in sorted(records, key=lambda r: r["rank"]) if r.get("attempt") == last}


def _error_files(name: str, dir_fd: int) -> list[str]:
    """Return the names of the workers' error files of the run name in the folder dir_fd."""
    from ._worker import RESULT_SUFFIX, error_name  # pylint: disable=import-outside-toplevel

    prefix, suffix = error_name(name + RESULT_SUFFIX, 0)[: -len("0.pkl")], ".pkl"
    return [
        f for f in os.listdir(dir_fd)
        if f.startswith(prefix) and f.endswith(suffix) and f[len(prefix):-len(suffix)].isdigit()
    ]


def _remove_errors(name: str, dir_fd: int) -> None:
    """Remove the workers' error files an earlier fit() of the run name left."""
    for file in _error_files(name, dir_fd):
        _remove(file, dir_fd)


def _last_attempt(run_dir: str) -> int:
    """Return the number of the run's last attempt, from its run.json (0 if unknown)."""
    import json  # pylint: disable=import-outside-toplevel

    try:
        with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as f:
            return len(json.load(f).get("attempts") or [])
    except (OSError, ValueError, AttributeError):
        return 0


def _exception(record: dict[str, Any]) -> BaseException:
    """Return the worker's exception, or a RuntimeError that names it when it did not pickle."""
    if record.get("exception"):
        try:
            exc = pickle.loads(record["exception"])
            if isinstance(exc, BaseException):
                return exc
        except Exception:  # a class the driver cannot import
            pass
    return RuntimeError(f"{record.get('type')}: {record.get('message')}")


def command(trainer: Any, storage: str, name: str) -> list[str]:
    """Return the ``trainyard run`` flags that start the gang the trainer's configs ask for."""
    sc, rc = trainer.scaling_config, trainer.run_config
    argv = [os.environ["TRAINYARD_BINARY"], "run", "--workers", _workers(sc),
            "--storage-path", storage, "--name", name]
    # As in Ray Train V2, a run whose name exists already (here, or in the bucket of an
    # s3:// storage path) continues from its latest checkpoint, even when it finished.
    argv.append("--resume-if-any")
    gpus = sc.gpus_per_worker
    if gpus > 0:
        if gpus != int(gpus):
            raise ValueError(
                f"ScalingConfig: {gpus} GPUs per worker; Trainyard gives whole GPUs: use 1 or more"
            )
        argv += ["--gpus-per-worker", str(int(gpus)), "--procs-per-worker", "1"]
    argv += _resources.flags(sc, _say)
    failures = rc.failure_config.max_failures if rc.failure_config else 0
    if failures:
        argv += ["--max-restarts", str(UNLIMITED_RESTARTS if failures < 0 else failures)]
    cc = rc.checkpoint_config
    if cc is not None and cc.num_to_keep:
        argv += ["--keep-checkpoints", str(cc.num_to_keep)]
    if cc is not None and cc.checkpoint_score_attribute:
        argv += ["--checkpoint-score", cc.checkpoint_score_attribute, "--score-order", cc.checkpoint_score_order]
    return argv


def _say(message: str) -> None:
    """Write ``ray.train: <message>`` to the driver's stderr."""
    print(f"ray.train: {message}", file=sys.stderr, flush=True)


def _workers(sc: Any) -> str:
    """--workers for the scaling config: N, or MIN:MAX for an elastic gang."""
    if sc.min_workers < sc.max_workers:
        return f"{sc.min_workers}:{sc.max_workers}"
    return str(sc.max_workers)


def _run_place(rc: Any) -> tuple[str, str]:
    """Return (storage path, run name) of the gang's run."""
    storage = rc.storage_path or os.environ.get("TRAINYARD_STORAGE_PATH") or os.getcwd()
    name = rc.name or default_name(os.environ.get("TRAINYARD_RUN_NAME") or "ray")
    if isinstance(storage, str) and "://" in storage:
        scheme = storage.split("://", 1)[0].lower()
        if scheme == "s3":
            return "s3" + storage[2:], name  # trainyard run checks the bucket and its credentials
        raise ValueError(
            f"RunConfig(storage_path={storage!r}): the scheme {scheme}:// is not supported: give s3://bucket/prefix "
            "(Cloud Storage too, through its S3-compatible API: AWS_ENDPOINT_URL=https://storage.googleapis.com "
            "and an HMAC key), or a folder"
        )
    return os.path.expanduser(storage), name


def local_run_dir(storage: str, name: str) -> str:
    """Return the folder of the run name of storage on this machine: <storage>/<name>, or for
    a bucket (s3://bucket/prefix) its staging folder, as trainyard's jobspec.LocalStorage
    names it: <TRAINYARD_STAGING_DIR>/s3/<bucket>/<prefix>/<name>."""
    if "://" not in storage:
        return os.path.join(storage, name)
    rest = [p for p in storage.split("://", 1)[1].split("/") if p]
    staging = os.environ.get("TRAINYARD_STAGING_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "trainyard", "storage")
    return os.path.join(staging, "s3", *rest, name)


def default_name(driver: str) -> str:
    """Return the gang's run name for a RunConfig without one: ``<driver's run name>-train``,
    made a Trainyard run name (1 to 45 lower-case letters, digits and '-', starting with a
    letter). A driver name it had to change (Ray's default submission IDs, such as
    ``raysubmit_fPOmfwdHK5QGnJKC``, have capitals and '_') gets a short hash of itself, so
    that two names that differ only there never share a run."""
    import hashlib  # pylint: disable=import-outside-toplevel
    import re  # pylint: disable=import-outside-toplevel

    base = re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", driver.lower())).strip("-")
    if not base[:1].isalpha() or not base[:1].isascii():
        base = ("ray-" + base).rstrip("-")
    suffix = "-train"
    if base != driver:
        suffix = "-" + hashlib.sha256(driver.encode()).hexdigest()[:6] + suffix
    return base[: MAX_NAME - len(suffix)].rstrip("-") + suffix


def _child_env() -> dict[str, str]:
    """Return the child trainyard's environment: this one, with the host's GPUs given back.

    Trainyard hid the GPUs from this driver process (it asked for none); the child
    discovers and hands them out again, so it must see what trainyard itself saw.
    """
    env = dict(os.environ)
    for key in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        env.pop(key, None)
    host = os.environ.get("TRAINYARD_HOST_CUDA_VISIBLE_DEVICES")
    if host is not None:
        env["CUDA_VISIBLE_DEVICES"] = host
    return env


def _remove(name: str, dir_fd: int) -> None:
    """Remove the file name in the folder dir_fd, if it is there."""
    try:
        os.remove(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


#: The file of the driver's folder that names the run of its (latest) gang: the job's
#: results, checkpoints and curves are that run's (Go: rundir.GangRun).
GANG_FILE = "gang.json"


def _write_gang(run_dir: str, dir_fd: int) -> None:
    """Name the gang's run folder in the driver's folder (GANG_FILE, 0600)."""
    import json  # pylint: disable=import-outside-toplevel

    _remove(GANG_FILE, dir_fd)
    fd = os.open(GANG_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
    with os.fdopen(fd, "w") as f:
        json.dump({"run": os.path.abspath(os.path.expanduser(run_dir))}, f)


def _write_private(name: str, dir_fd: int, value: Any) -> None:
    """Pickle value to a new 0600 file name in the folder dir_fd."""
    _remove(name, dir_fd)
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
    with os.fdopen(fd, "wb") as f:
        pickle.dump(value, f)


def _result(run_dir: str, result_name: str, dir_fd: int) -> Result:
    """Return the Result of the gang's run: rank 0's last metrics and the latest checkpoint."""
    from trainyard import _rundir  # pylint: disable=import-outside-toplevel

    metrics, last, kept = None, None, []
    try:
        fd = _rundir.open_own_file(result_name, dir_fd)
    except FileNotFoundError:
        fd = None
    if fd is not None:
        with os.fdopen(fd, "rb") as f:
            metrics, last, kept = pickle.load(f)
    if last is None or not os.path.isdir(os.path.join(run_dir, last)):
        names = sorted(n for n in os.listdir(run_dir) if n.startswith("checkpoint_")) if os.path.isdir(run_dir) else []
        last = names[-1] if names else None
    best = [(Checkpoint(os.path.join(run_dir, n)), m) for n, m in kept if os.path.isdir(os.path.join(run_dir, n))]
    return Result(
        metrics=metrics,
        checkpoint=Checkpoint(os.path.join(run_dir, last)) if last else None,
        path=run_dir,
        best_checkpoints=best,
        metrics_dataframe=read_progress(run_dir),
    )

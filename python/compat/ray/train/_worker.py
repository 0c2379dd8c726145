"""A worker of a gang that a driver's TorchTrainer.fit() launched (see ``_driver``).

``python -c <_driver.WORKER_BOOT> <spec>``: reads the pickled spec the driver wrote (0600,
in the driver's run folder; refused unless it is a private file of this user, as
unpickling runs code), imports the driver's script as the module
``__trainyard_driver__`` (with the driver's ``sys.argv``, so argparse at the top level
works, and without running its ``if __name__ == "__main__":`` block), finds the loop there
by its qualified name and runs it through the in-gang TorchTrainer.fit(). A script that
calls fit() at its top level runs that fit() while it is imported, in the gang, and the
loop is not run twice.

The working folder is not first on a worker's sys.path (WORKER_BOOT takes it off): the
script's folder and the working folder come last (extend_path), after this package and
the installed ones, so the loop imports its sibling modules as Ray's workers do, and a
package that someone else created in a shared folder after the driver started shadows
nothing.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pickle
import sys
from typing import Any

#: The name the driver's script is imported under in a worker.
MODULE = "__trainyard_driver__"

#: Where fit() in a worker writes rank 0's outcome for the driver (set by main).
RESULT_ENV = "TRAINYARD_RAY_RESULT_FILE"


def main(argv: list[str]) -> int:
    """Run the loop the driver's spec names; return the exit code."""
    if len(argv) != 1:
        print("usage: python -m ray.train._worker <spec file written by TorchTrainer.fit()>", file=sys.stderr)
        return 2
    from trainyard import _rundir  # pylint: disable=import-outside-toplevel

    # The spec is unpickled: only a private file of this user, never a link to one.
    with os.fdopen(_rundir.open_own_file(argv[0]), "rb") as f:
        spec = pickle.load(f)
    os.environ[RESULT_ENV] = spec["result_file"]
    try:
        run(spec)
    except Exception as e:  # for the driver's TrainingFailedError, then fail as before
        write_error(e)
        raise
    return 0


def run(spec: dict[str, Any]) -> None:
    """Import the driver's script, then run its loop through the in-gang fit()."""
    from .torch import _trainer

    module = load(spec)
    if _trainer.fits_run() > 0:  # the script called fit() at its top level: done
        return
    loop = find(module, spec["qualname"], spec["script"] or spec["module"])
    trainer = _trainer.TorchTrainer(loop, train_loop_config=spec["config"], **spec["trainer"])
    trainer.fit()


def load(spec: dict[str, Any]) -> Any:
    """Import the module that defines the loop: the driver's script, or a module by name."""
    extend_path(spec)
    if not spec["script"]:
        return importlib.import_module(spec["module"])
    script = spec["script"]
    sys.argv = list(spec["argv"])
    loaded = importlib.util.spec_from_file_location(MODULE, script)
    if loaded is None or loaded.loader is None:
        raise ImportError(f"ray.train: cannot import the driver's script {script}")
    module = importlib.util.module_from_spec(loaded)
    sys.modules[MODULE] = module
    loaded.loader.exec_module(module)
    return module


def extend_path(spec: dict[str, Any]) -> None:
    """Append the script's folder and the working folder to sys.path, where they are not.

    The driver found its modules there (``python3 train.py`` puts the script's folder
    first, ``python3 -m pkg.train`` the working folder), and Ray adds both to its workers'
    paths; last, not first, so that nothing created there later shadows this package or
    an installed one.
    """
    folders = [os.path.dirname(spec["script"])] if spec["script"] else []
    for folder in folders + [os.getcwd()]:
        if folder not in sys.path:
            sys.path.append(folder)


def find(module: Any, qualname: str, where: str) -> Any:
    """Return the object named qualname (a.b.c) in module, or raise a clear error."""
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise LookupError(
                f"ray.train: train_loop_per_worker {qualname!r} is not defined when {where} is imported: "
                "it is probably defined under if __name__ == \"__main__\":, which the workers do not run. "
                "Move the def to the top level of the script (keep only the fit() call under __main__)"
            )
    return obj


def write_result(outcome: tuple[Any, Any, Any]) -> None:
    """Write rank 0's (metrics, last checkpoint, kept checkpoints) for the driver, if it asked."""
    path = os.environ.get(RESULT_ENV)
    if path:
        _write_for_driver(path, outcome)


#: The end of the result file's name; a rank's error file replaces it (see error_name).
RESULT_SUFFIX = ".result.pkl"


def error_name(result_name: str, rank: int) -> str:
    """Return the name of the file where rank writes its exception, beside the result file."""
    base = result_name[: -len(RESULT_SUFFIX)] if result_name.endswith(RESULT_SUFFIX) else result_name
    return f"{base}.error.{rank}.pkl"


def write_error(exc: BaseException) -> None:
    """Write this rank's exception (its type, message and traceback) for the driver, if it
    asked: the driver's TrainingFailedError carries it, as Ray's does."""
    import time  # pylint: disable=import-outside-toplevel

    import trainyard  # pylint: disable=import-outside-toplevel

    path = os.environ.get(RESULT_ENV)
    if not path:
        return
    ctx = trainyard.get_context()
    try:
        pickled: bytes | None = pickle.dumps(exc)
        pickle.loads(pickled)
    except Exception:  # an exception that does not pickle (or unpickle): its text only
        pickled = None
    record = {
        "rank": ctx.rank,
        "attempt": ctx.attempt,
        "time": time.time(),
        "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "message": str(exc),
        "traceback": user_traceback(exc),
        "exception": pickled,
    }
    folder, name = os.path.split(os.path.abspath(path))
    try:
        _write_for_driver(os.path.join(folder, error_name(name, ctx.rank)), record)
    except OSError as e:
        print(f"ray.train: cannot hand this worker's error to the driver: {e}", file=sys.stderr, flush=True)


def user_traceback(exc: BaseException) -> str:
    """Return exc's traceback as Python prints it, without the frames of this package and
    of the import machinery that lead to the script's code."""
    import traceback  # pylint: disable=import-outside-toplevel

    te = traceback.TracebackException.from_exception(exc)
    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the ray package
    frames = list(te.stack)
    while frames and (frames[0].filename.startswith(ours + os.sep) or frames[0].filename.startswith("<frozen ")):
        frames.pop(0)
    if frames:
        te.stack = traceback.StackSummary.from_list(frames)
    return "".join(te.format())


def _write_for_driver(path: str, value: Any) -> None:
    """Pickle value to path, in the driver's private folder only: a real folder of this
    user, opened once; written aside, then renamed into place."""
    from trainyard import _rundir  # pylint: disable=import-outside-toplevel

    folder, name = os.path.split(os.path.abspath(path))
    parent_fd = os.open(os.path.dirname(folder), os.O_RDONLY | os.O_DIRECTORY)
    try:
        dir_fd = _rundir.open_private(parent_fd, os.path.basename(folder), folder, 0o700)
    finally:
        os.close(parent_fd)
    try:
        tmp = f"{name}.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
        with os.fdopen(fd, "wb") as f:
            pickle.dump(value, f)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

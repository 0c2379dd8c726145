"""A worker of a gang that a driver's TorchTrainer.fit() launched (see ``_driver``).

``python -c <_driver.WORKER_BOOT> <spec>``: reads the pickled spec the driver wrote (0600,
in the driver's run folder; refused unless it is a private file of this user, as
unpickling runs code), checks that this Python can load the driver's code (the same
bytecode version), loads the loop the driver pickled by value (``_byvalue``) and runs it
through the in-gang TorchTrainer.fit(). The driver's script is never imported: as in Ray,
its top level runs once, in the driver. ``sys.argv`` is the driver's, for a loop that
reads it.

The working folder is not first on a worker's sys.path (WORKER_BOOT takes it off): the
script's folder, the folders of the driver's sys.path and the working folder come last
(extend_path), after this package and the installed ones, so the loop imports its sibling
modules as Ray's workers do, and a package that someone else created in a shared folder
after the driver started shadows nothing.
"""

from __future__ import annotations

import os
import pickle
import sys
from typing import Any

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
    """Load the driver's loop, then run it through the in-gang fit()."""
    from .torch import _trainer

    parts = load(spec)
    loop = parts.pop("train_loop_per_worker")
    config = parts.pop("train_loop_config")
    trainer = _trainer.TorchTrainer(loop, train_loop_config=config, **parts)
    trainer.fit()


def load(spec: dict[str, Any]) -> dict[str, Any]:
    """Return the loop and configs the driver pickled, once its folders are on sys.path."""
    from . import _byvalue  # pylint: disable=import-outside-toplevel
    from ._driver import SPEC_VERSION  # pylint: disable=import-outside-toplevel

    if spec.get("version") != SPEC_VERSION:
        raise RuntimeError(
            f"ray.train: the driver wrote its spec in format {spec.get('version')}, this worker reads "
            f"{SPEC_VERSION}: the driver and its workers must use the same Trainyard"
        )
    if spec["python"] != _byvalue.python_tag():
        raise _byvalue.WrongPython(
            f"ray.train: the driver runs Python {spec['python']} ({spec['executable']}), this worker "
            f"{_byvalue.python_tag()} ({sys.executable}); train_loop_per_worker's code loads only in the "
            "driver's Python: start the script with the Python its workers run"
        )
    extend_path(spec["path"])
    sys.argv = list(spec["argv"])
    parts = _byvalue.loads(spec["payload"])
    share_main(parts["train_loop_per_worker"])
    return parts


def extend_path(folders: list[str]) -> None:
    """Append the driver's folders (the script's, its sys.path's, the working folder) to
    sys.path, where they are not.

    The driver found its modules there (``python3 train.py`` puts the script's folder
    first, ``python3 -m pkg.train`` the working folder), and Ray adds both to its workers'
    paths; last, not first, so that nothing created there later shadows this package or
    an installed one.
    """
    for folder in folders:
        if folder not in sys.path:
            sys.path.append(folder)


def share_main(loop: Any) -> None:
    """Give this worker's ``__main__`` the script's top-level functions and classes the loop
    uses, where it has none of that name, so that pickle finds them by name here as in
    the driver (``torch.save`` of a model whose class the script defines, say)."""
    import types  # pylint: disable=import-outside-toplevel

    main = sys.modules.get("__main__")
    g = getattr(loop, "__globals__", None)
    if main is None or getattr(loop, "__module__", None) != "__main__" or not isinstance(g, dict):
        return
    for name, value in g.items():
        if (isinstance(value, (type, types.FunctionType)) and getattr(value, "__module__", None) == "__main__"
                and getattr(value, "__qualname__", None) == name and not hasattr(main, name)):
            setattr(main, name, value)


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

"""report(): send metrics, and a checkpoint, to the Trainyard launcher.

Protocol
--------
The launcher serves a Unix stream socket at the path in TRAINYARD_REPORT_SOCKET. Each
worker process opens one connection to it, at its first ``report()``, and keeps it (a
forked child starts afresh with its own). Requests and responses are single lines of
JSON: UTF-8, ended by ``"\\n"``, with no raw newline inside. The server sends exactly one
response per request, in order. Both sides ignore fields they do not know.

Requests are pipelined: the first report of a process, and every report that carries a
checkpoint, waits for its response; a report of metrics alone is sent without waiting,
so that it costs training a JSON encoding and a ``send`` (tens of microseconds) rather than
a round trip. Its response is read at a later ``report()`` (all pending responses are read
without blocking before each request, and with blocking before a checkpoint), and an
error in it is raised then, naming the iteration. Its ``iteration`` is counted here: one
more than the previous report's, as the launcher counts too. A lock serialises threads.

Request::

    {"op": "report", "rank": 0,
     "metrics": {"loss": 0.25, "step": 100, "grad_norm": "NaN"},
     "checkpoint": "/abs/path/to/folder"}

- ``rank``: the sender's RANK. Every rank reports; rank 0's metrics are the run's.
- ``metrics``: non-empty names -> JSON numbers (integers or floats); a non-finite float is
  sent as one of the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``.
- ``checkpoint``: the absolute path of an existing folder to commit, or ``null``. Any rank
  may send one (rank 0 always sends the folder it was given; the other ranks send ``null``
  for an empty one). The folders that ranks send with the same report (their n-th of the
  attempt) are merged into one checkpoint, committed once every rank has made that report;
  where two hold the same file, the lowest rank's is kept.

A rank that checks for preemption (``trainyard.preemption()``) first sends, once per
process and on a connection of its own, ``{"op": "listen", "rank": 0}``: the launcher then
waits for its checkpoint when the job is preempted, even before its first report. The
answer is ``{"ok": true, ...}``.

Response, on success and on failure::

    {"ok": true, "iteration": 3, "checkpoint": "checkpoint_000003"}
    {"ok": false, "error": "message"}

- ``iteration``: the report's 1-based number in the run, as the launcher counts it.
- ``checkpoint``: the name the checkpoint of this report will have (the folder has been moved
  out of the way; it is committed in the background, once every rank has made this report),
  or ``null`` when the request carried none.
- ``error``: ``report()`` raises ``ReportError(error)``.

When the socket cannot be reached, or the connection breaks before a whole response line
has come back, ``report()`` raises :class:`ReportError`; the next call connects again.

Without TRAINYARD_REPORT_SOCKET (a plain ``python3 train.py``, torchrun, an IDE), rank 0
prints each report's metrics on stderr as ``trainyard.report: {...}`` and keeps them and its
checkpoints in a local folder (:func:`local_dir`), as Ray Train's local mode does.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import shutil
import socket
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._context import _warn_once, get_context

__all__ = ["report", "ReportResult", "ReportError"]


class ReportError(RuntimeError):
    """The launcher refused a report, or could not be reached."""


@dataclass(frozen=True)
class ReportResult:
    """What the launcher made of a report.

    Attributes:
        iteration: the report's 1-based number in the run.
        checkpoint: the committed checkpoint's name (e.g. "checkpoint_000003"), or None.
    """

    iteration: int
    checkpoint: str | None = None


def report(
    metrics: Mapping[str, Any], checkpoint: str | os.PathLike[str] | None = None
) -> ReportResult:
    """Report this step's metrics, and optionally a checkpoint folder, to the launcher.

    Every rank calls it, at the same points; rank 0's metrics are the run's. Every rank may
    pass a checkpoint folder, as in Ray Train: the folders of the same report are merged into
    one checkpoint (each rank's shard of a sharded model; where two ranks wrote the same
    file, the lowest rank's copy is kept), committed once every rank has made that report.
    On ranks other than 0 an empty folder adds nothing and is not sent.

    Args:
        metrics: names (str) -> numbers: int, float, or anything whose ``.item()`` gives
            one (numpy and torch scalars, one-element tensors). bool is not a number here.
        checkpoint: a folder holding this rank's files of the checkpoint, best made with
            :func:`trainyard.new_checkpoint_dir`. The launcher moves them away (the folder
            is left empty) before this returns.

    Raises:
        TypeError: a metric name is not a str, or a value is not a number.
        ValueError: the checkpoint does not exist or is not a folder.
        ReportError: the launcher answered with an error (for a report of metrics alone,
            which is not waited for, at the next call), or could not be reached.
    """
    encoded = _encode_metrics(metrics)
    path = _checkpoint_path(checkpoint)
    ctx = get_context()
    if path is not None and ctx.rank != 0 and not os.listdir(path):
        path = None  # nothing to add to the checkpoint: no need to wait for the launcher

    socket_path = os.environ.get("TRAINYARD_REPORT_SOCKET")
    if not socket_path:
        return _report_locally(ctx.rank, encoded, path)
    iteration, committed = _client.request(
        socket_path,
        {"op": "report", "rank": ctx.rank, "metrics": encoded, "checkpoint": path},
        wait=path is not None,
    )
    return ReportResult(iteration=iteration, checkpoint=committed)


# --- validation --------------------------------------------------------------------------


def _encode_metrics(metrics: Any) -> dict[str, int | float | str]:
    """Return ``metrics`` as JSON-ready numbers, or raise TypeError/ValueError saying why."""
    if not isinstance(metrics, Mapping):
        raise TypeError(
            f"report: metrics must be a dict of names to numbers, not {type(metrics).__name__}"
        )
    encoded: dict[str, int | float | str] = {}
    for name, value in metrics.items():
        if not isinstance(name, str):
            raise TypeError(
                f"report: metric name {name!r} is {type(name).__name__}; "
                "metric names must be strings"
            )
        if not name:
            raise ValueError("report: metric names must not be empty")
        encoded[name] = _encode_number(name, value)
    return encoded


def _encode_number(name: str, value: Any) -> int | float | str:
    """Return ``value`` as an int, a float, or "NaN"/"Infinity"/"-Infinity"."""
    number = value
    if not _is_number(number) and not isinstance(number, bool):
        item = getattr(number, "item", None)
        if callable(item):
            try:
                number = item()
            except Exception:  # e.g. a tensor of several elements
                pass
    if not _is_number(number):
        raise TypeError(f"report: metric {name!r} is {_describe(value)}; metrics must be numbers")
    if isinstance(number, int):
        return int(number)
    real = float(number)
    if math.isnan(real):
        return "NaN"
    if math.isinf(real):
        return "Infinity" if real > 0 else "-Infinity"
    return real


def _is_number(value: Any) -> bool:
    """Return whether ``value`` is an int or a float, and not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _describe(value: Any) -> str:
    """Return e.g. "str ('high')" or "numpy.bool (np.True_)": the type's name, with its
    module unless it is a built-in, and a short, one-line repr."""
    text = " ".join(repr(value).split())
    if len(text) > 60:
        text = text[:57] + "..."
    kind = type(value)
    name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return f"{name} ({text})"


def _checkpoint_path(checkpoint: Any) -> str | None:
    """Return the checkpoint's absolute path, after checking that it is a folder."""
    if checkpoint is None:
        return None
    try:
        raw = os.fspath(checkpoint)
    except TypeError:
        raise TypeError(
            "report: checkpoint must be the path of a folder (str or os.PathLike), "
            f"not {type(checkpoint).__name__}"
        ) from None
    path: str = os.fsdecode(raw)
    if not path:
        raise ValueError("report: checkpoint is an empty path")
    path = os.path.abspath(path)
    if not os.path.exists(path):
        raise ValueError(f"report: checkpoint {path} does not exist")
    if not os.path.isdir(path):
        kind = "a file" if os.path.isfile(path) else "not a folder"
        raise ValueError(f"report: checkpoint {path} is {kind}; it must be a folder")
    return path


# --- without a launcher ------------------------------------------------------------------

_local_lock = threading.Lock()
_local_iteration = 0

#: Names the folder where a script run outside Trainyard keeps rank 0's metrics and
#: checkpoints; by default ~/trainyard_results/local/<script name>.
LOCAL_DIR_ENV = "TRAINYARD_LOCAL_DIR"


def local_dir() -> str:
    """The folder where reports made outside Trainyard are kept (see LOCAL_DIR_ENV)."""
    given = os.environ.get(LOCAL_DIR_ENV)
    if given:
        return os.path.abspath(os.path.expanduser(given))
    script = os.path.splitext(os.path.basename(sys.argv[0] if sys.argv and sys.argv[0] else ""))[0] or "python"
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in script) or "python"
    return os.path.join(os.path.expanduser("~"), "trainyard_results", "local", name)


def _report_locally(
    rank: int, metrics: dict[str, int | float | str], checkpoint: str | None
) -> ReportResult:
    """Outside Trainyard (plain python, torchrun, an IDE, unit tests), as Ray Train's local
    mode: rank 0 prints its metrics on stderr, appends them to ``result.json`` in
    :func:`local_dir`, and moves its checkpoint folder there as ``checkpoint_NNNNNN``; other
    ranks' checkpoint folders are left where they are. Said once, with the folder."""
    global _local_iteration
    with _local_lock:
        _local_iteration += 1
        iteration = _local_iteration
    if rank != 0:
        if checkpoint is not None:
            _warn_once("local-checkpoint", "report: outside trainyard (TRAINYARD_REPORT_SOCKET is unset) "
                       "only rank 0's checkpoints are kept; this rank's folder is left where it is")
        return ReportResult(iteration=iteration, checkpoint=None)
    line = json.dumps(metrics, ensure_ascii=False)
    print(f"trainyard.report: {line}", file=sys.stderr, flush=True)
    folder = local_dir()
    _warn_once("local", f"report: outside trainyard (TRAINYARD_REPORT_SOCKET is unset): rank 0's metrics and "
               f"checkpoints are kept in {folder} ({LOCAL_DIR_ENV} to choose another folder)")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        name = _keep_locally(folder, checkpoint) if checkpoint is not None else None
        record = {"training_iteration": iteration, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  **metrics}
        if name is not None:
            record["checkpoint"] = name
        with open(os.path.join(folder, "result.json"), "a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    except OSError as e:
        _warn_once("local-error", f"report: could not keep the report in {folder}: {e}")
        name = None
    return ReportResult(iteration=iteration, checkpoint=name)


def _keep_locally(folder: str, checkpoint: str) -> str:
    """Move the checkpoint folder into folder as the next checkpoint_NNNNNN; its name."""
    taken = [int(n[len("checkpoint_"):]) for n in os.listdir(folder)
             if n.startswith("checkpoint_") and n[len("checkpoint_"):].isdigit()]
    name = "checkpoint_%06d" % (max(taken, default=0) + 1)
    shutil.move(checkpoint, os.path.join(folder, name))
    os.makedirs(checkpoint, exist_ok=True)  # the folder handed over is left empty, as under trainyard
    return name


# --- the connection to the launcher ------------------------------------------------------


class _Client:
    """This process's one connection to the launcher's report socket."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._path: str | None = None
        self._sock: socket.socket | None = None
        self._buf = bytearray()  # received bytes not yet parsed into lines
        self._unanswered: list[int] = []  # iterations of sent requests awaiting an answer
        self._iteration: int | None = None  # the last iteration known or predicted

    def request(self, path: str, message: dict[str, Any], wait: bool) -> tuple[int, str | None]:
        """Send ``message`` to the socket at ``path``; return (iteration, checkpoint).

        With ``wait`` (or before the first answer of this connection) the answer is read
        before returning; without, the request is pipelined and its iteration predicted.
        """
        data = (json.dumps(message, ensure_ascii=False, allow_nan=False) + "\n").encode()
        with self._lock:
            if self._sock is None or self._path != path:
                self._connect(path)
            wait = wait or self._iteration is None
            try:
                self._settle(block=wait)
                self._sock.sendall(data)  # type: ignore[union-attr]
                if not wait:
                    self._iteration = (self._iteration or 0) + 1
                    self._unanswered.append(self._iteration)
                    return self._iteration, None
                self._unanswered.append(-1)
                response = self._settle(block=True)
            except OSError as e:
                self.close()
                raise ReportError(
                    "report: lost the connection to the trainyard launcher "
                    f"(TRAINYARD_REPORT_SOCKET={path}): {e}"
                ) from e
            except BaseException:  # e.g. KeyboardInterrupt: answers would come late
                self.close()
                raise
        assert response is not None
        return response["iteration"], response.get("checkpoint")

    def _settle(self, block: bool) -> dict[str, Any] | None:
        """Read the answers to the requests sent so far: all of them when ``block``, else
        those already here. Raise ReportError for the first that failed; return the last."""
        last = None
        while self._unanswered:
            line = self._next_line(block)
            if line is None:
                return last
            sent = self._unanswered.pop(0)
            try:
                last = _check_response(line)
            except ReportError as e:
                if sent > 0:
                    raise ReportError(f"report of iteration {sent}: {e}") from None
                raise
            if sent < 0:  # an answer waited for: the launcher's count is the basis
                self._iteration = last["iteration"]
        return last

    def flush(self) -> None:
        """Wait for the answers to every report sent; raise ReportError for a failed one."""
        with self._lock:
            if self._sock is not None:
                try:
                    self._settle(block=True)
                except OSError as e:
                    self.close()
                    raise ReportError(f"report: lost the connection to the trainyard launcher: {e}") from e

    def _next_line(self, block: bool) -> bytes | None:
        """Return the next answer line, or None when ``block`` is off and none is here."""
        sock = self._sock
        assert sock is not None
        while b"\n" not in self._buf:
            sock.setblocking(block)
            try:
                chunk = sock.recv(65536)
            except BlockingIOError:
                return None
            finally:
                sock.setblocking(True)
            if not chunk:
                raise ReportError(
                    "report: the trainyard launcher closed the connection "
                    f"(TRAINYARD_REPORT_SOCKET={self._path}) before answering"
                )
            self._buf += chunk
        end = self._buf.index(b"\n") + 1
        line = bytes(self._buf[:end])
        del self._buf[:end]
        return line

    def _connect(self, path: str) -> None:
        """(Re)connect to the socket at ``path``."""
        self.close()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except OSError as e:
            sock.close()
            raise ReportError(
                "report: cannot reach the trainyard launcher at "
                f"TRAINYARD_REPORT_SOCKET={path}: {e}"
            ) from e
        self._path, self._sock = path, sock

    def close(self) -> None:
        """Close the connection, if any; the next request opens a new one."""
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        self._path, self._sock, self._buf = None, None, bytearray()
        self._unanswered, self._iteration = [], None

    def _after_fork(self) -> None:
        """In a forked child: drop the parent's connection and lock (they are not ours)."""
        self._lock = threading.Lock()
        self.close()


def _check_response(line: bytes) -> dict[str, Any]:
    """Return the decoded successful response, or raise ReportError."""
    try:
        response = json.loads(line.decode("utf-8"))
    except ValueError:
        response = None
    if not isinstance(response, dict):
        raise ReportError(f"report: the trainyard launcher sent an invalid response: {line!r}")
    if response.get("ok") is not True:
        raise ReportError(str(response.get("error") or "report: the launcher refused the report"))
    iteration, checkpoint = response.get("iteration"), response.get("checkpoint")
    valid_iteration = isinstance(iteration, int) and not isinstance(iteration, bool)
    if not valid_iteration or not (checkpoint is None or isinstance(checkpoint, str)):
        raise ReportError(f"report: the trainyard launcher sent an invalid response: {line!r}")
    return response


_client = _Client()


def _flush_at_exit() -> None:
    """At exit, wait for the answers to pipelined reports, so that none is lost unsaid."""
    try:
        _client.flush()
    except ReportError as e:
        print(f"trainyard: {e}", file=sys.stderr, flush=True)


atexit.register(_flush_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_client._after_fork)

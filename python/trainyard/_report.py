"""report(): send metrics, and a checkpoint, to the Trainyard launcher.

Protocol
--------
The launcher serves a Unix stream socket at the path in TRAINYARD_REPORT_SOCKET. Each
worker process opens one connection to it, at its first ``report()``, and keeps it (a
forked child starts afresh with its own). Requests and responses are single lines of
JSON: UTF-8, ended by ``"\\n"``, with no raw newline inside. The server sends exactly one
response per request, in order; a process sends its next request only after reading the
response to the previous one (a lock serialises its threads). Both sides ignore fields
they do not know.

Request::

    {"op": "report", "rank": 0,
     "metrics": {"loss": 0.25, "step": 100, "grad_norm": "NaN"},
     "checkpoint": "/abs/path/to/folder"}

- ``rank``: the sender's RANK. Every rank reports; rank 0's metrics are the run's.
- ``metrics``: non-empty names -> JSON numbers (integers or floats); a non-finite float is
  sent as one of the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``.
- ``checkpoint``: the absolute path of an existing folder to commit, or ``null``. Only rank
  0 ever sends one; the other ranks always send ``null``.

Response, on success and on failure::

    {"ok": true, "iteration": 3, "checkpoint": "checkpoint_000003"}
    {"ok": false, "error": "message"}

- ``iteration``: the report's 1-based number in the run, as the launcher counts it.
- ``checkpoint``: the name of the committed checkpoint (the folder has been moved into the
  run's folder under that name), or ``null`` when the request carried none.
- ``error``: ``report()`` raises ``ReportError(error)``.

When the socket cannot be reached, or the connection breaks before a whole response line
has come back, ``report()`` raises :class:`ReportError`; the next call connects again.

Without TRAINYARD_REPORT_SOCKET (a plain ``python3 train.py``), rank 0 prints each report's
metrics on stderr as ``trainyard.report: {...}`` and checkpoints are ignored with a warning.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sys
import threading
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

    Every rank calls it, at the same points; rank 0's metrics are the run's. Only rank 0's
    checkpoint is committed: on the other ranks an empty checkpoint folder is ignored, and
    one with files is ignored with a one-time warning.

    Args:
        metrics: names (str) -> numbers: int, float, or anything whose ``.item()`` gives
            one (numpy and torch scalars, one-element tensors). bool is not a number here.
        checkpoint: a folder holding the checkpoint's files, best made with
            :func:`trainyard.new_checkpoint_dir`. The launcher moves it away.

    Raises:
        TypeError: a metric name is not a str, or a value is not a number.
        ValueError: the checkpoint does not exist or is not a folder.
        ReportError: the launcher answered with an error, or could not be reached.
    """
    encoded = _encode_metrics(metrics)
    path = _checkpoint_path(checkpoint)
    ctx = get_context()
    if path is not None and ctx.rank != 0:
        if os.listdir(path):
            _warn_once(
                "rank-checkpoint",
                f"rank {ctx.rank} passed a checkpoint with files; "
                "only rank 0's checkpoint is kept",
            )
        path = None

    socket_path = os.environ.get("TRAINYARD_REPORT_SOCKET")
    if not socket_path:
        return _report_locally(ctx.rank, encoded, path)
    response = _client.request(
        socket_path,
        {"op": "report", "rank": ctx.rank, "metrics": encoded, "checkpoint": path},
    )
    return ReportResult(iteration=response["iteration"], checkpoint=response.get("checkpoint"))


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
    """Return e.g. "str ('high')": the type's name and a short, one-line repr."""
    text = " ".join(repr(value).split())
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} ({text})"


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


def _report_locally(
    rank: int, metrics: dict[str, int | float | str], checkpoint: str | None
) -> ReportResult:
    """Outside Trainyard: print rank 0's metrics on stderr and ignore the checkpoint."""
    global _local_iteration
    if checkpoint is not None:
        _warn_once(
            "local-checkpoint",
            "report: not running under trainyard (TRAINYARD_REPORT_SOCKET is unset); "
            "checkpoints are not kept",
        )
    with _local_lock:
        _local_iteration += 1
        iteration = _local_iteration
    if rank == 0:
        line = json.dumps(metrics, ensure_ascii=False)
        print(f"trainyard.report: {line}", file=sys.stderr, flush=True)
    return ReportResult(iteration=iteration, checkpoint=None)


# --- the connection to the launcher ------------------------------------------------------


class _Client:
    """This process's one connection to the launcher's report socket."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._path: str | None = None
        self._sock: socket.socket | None = None
        self._reader: Any = None  # a binary file reading self._sock

    def request(self, path: str, message: dict[str, Any]) -> dict[str, Any]:
        """Send ``message`` to the socket at ``path`` and return the successful response."""
        data = (json.dumps(message, ensure_ascii=False, allow_nan=False) + "\n").encode()
        with self._lock:
            if self._sock is None or self._path != path:
                self._connect(path)
            try:
                self._sock.sendall(data)  # type: ignore[union-attr]
                line = self._reader.readline()
            except OSError as e:
                self.close()
                raise ReportError(
                    "report: lost the connection to the trainyard launcher "
                    f"(TRAINYARD_REPORT_SOCKET={path}): {e}"
                ) from e
            except BaseException:  # e.g. KeyboardInterrupt: the answer would come late
                self.close()
                raise
            if not line.endswith(b"\n"):
                self.close()
                raise ReportError(
                    "report: the trainyard launcher closed the connection "
                    f"(TRAINYARD_REPORT_SOCKET={path}) before answering"
                )
        return _check_response(line)

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
        self._path, self._sock, self._reader = path, sock, sock.makefile("rb")

    def close(self) -> None:
        """Close the connection, if any; the next request opens a new one."""
        for closable in (self._reader, self._sock):
            if closable is not None:
                try:
                    closable.close()
                except OSError:
                    pass
        self._path, self._sock, self._reader = None, None, None

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
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_client._after_fork)

"""preemption(): whether the gang must stop soon, and by when.

When Trainyard must stop a job that did not ask to stop (a signal to ``trainyard run``, the
job server making room for a job of higher priority, a pod's SIGTERM from an eviction or a
Kueue preemption), it first writes a preemption notice to the file named by
TRAINYARD_PREEMPTION_FILE: ``{"deadline": <seconds since the epoch>, "reason": "..."}``.
Until the deadline the ranks go on; a checkpoint reported before it is committed, and then
the launcher stops the gang, which resumes from that checkpoint when it starts again.

A loop checks it once per step (it costs a failed ``open`` while there is no notice)::

    for step in range(start, steps):
        train_step()
        if step % 1000 == 0 or trainyard.preemption() is not None:
            save_and_report(step)
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass

__all__ = ["Preemption", "preemption", "preemption_info"]

ENV_FILE = "TRAINYARD_PREEMPTION_FILE"


@dataclass(frozen=True)
class Preemption:
    """A preemption notice.

    Attributes:
        deadline: when the gang stops, in seconds since the epoch (compare with time.time()).
        reason: why, in words ("SIGTERM", "preempted by job hi (priority 5)").
    """

    deadline: float
    reason: str


_seen: Preemption | None = None
_listening_pid: int | None = None  # the process that told the launcher it listens


def _listen() -> None:
    """Tell the launcher, once per process, that this rank listens for the notice, so that
    a preemption waits for its checkpoint even before its first report: a one-line
    ``{"op": "listen", "rank": R}`` request on a connection of its own."""
    global _listening_pid
    path = os.environ.get("TRAINYARD_REPORT_SOCKET")
    if not path or _listening_pid == os.getpid():
        return
    _listening_pid = os.getpid()
    try:
        rank = int(os.environ.get("RANK", "0"))
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(path)
            s.sendall((json.dumps({"op": "listen", "rank": rank}) + "\n").encode())
            s.recv(4096)
    except (OSError, ValueError):
        pass  # the notice still comes; the launcher may just not wait for it


def preemption_info() -> Preemption | None:
    """The pending preemption notice, or None when there is none (or outside Trainyard)."""
    global _seen
    if _seen is not None:
        return _seen
    _listen()
    path = os.environ.get(ENV_FILE)
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read(64 << 10))
        _seen = Preemption(deadline=float(data["deadline"]), reason=str(data.get("reason", "")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return None  # half a notice cannot be read: the next call will
    return _seen


def preemption() -> float | None:
    """The deadline of a pending preemption (seconds since the epoch), or None.

    Save a checkpoint and ``trainyard.report(..., checkpoint=...)`` it before then: the
    launcher waits for that commit, then stops the gang; the next start resumes from it.
    """
    p = preemption_info()
    return None if p is None else p.deadline

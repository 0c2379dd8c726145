"""Helpers shared by the tests: a clean environment and a fake report server."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import socket
import tempfile
import threading
from typing import Any, Callable, Iterator
from unittest import mock

import trainyard._context
import trainyard._report

#: The folder holding the ``trainyard`` package, for subprocesses' PYTHONPATH.
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(trainyard.__file__)))

HAVE_TORCH = importlib.util.find_spec("torch") is not None
HAVE_NUMPY = importlib.util.find_spec("numpy") is not None

_LAUNCHER_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
)


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    """Run the block with the launcher's variables unset, then set to ``values``."""
    with mock.patch.dict(os.environ):
        for name in list(os.environ):
            if name in _LAUNCHER_VARS or name.startswith("TRAINYARD_"):
                del os.environ[name]
        os.environ.update(values)
        yield


def clean_env(**values: str) -> dict[str, str]:
    """Return a copy of os.environ for a subprocess: launcher variables replaced by ``values``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _LAUNCHER_VARS and not k.startswith("TRAINYARD_")
    }
    env["PYTHONPATH"] = PACKAGE_PARENT
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(values)
    return env


def reset_trainyard() -> None:
    """Forget one-time warnings and close the report connection."""
    trainyard._context._warned.clear()
    trainyard._report._client.close()


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


Responder = Callable[[dict[str, Any]], "dict[str, Any] | None"]


class FakeServer:
    """A stand-in for the launcher's report socket, in a thread.

    ``respond(request)`` returns the response to send, or None to close the connection
    without answering. By default it answers like the launcher: iterations count from 1,
    and a checkpoint is named ``checkpoint_<6 digits>`` after the checkpoints so far.
    """

    def __init__(self, respond: Responder | None = None) -> None:
        self.dir = tempfile.mkdtemp(prefix="ty-")
        self.path = os.path.join(self.dir, "report.sock")
        self.requests: list[dict[str, Any]] = []
        self.connections = 0
        self._respond = respond or self._default_respond
        self._checkpoints = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(64)
        self._listener.settimeout(0.05)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _default_respond(self, request: dict[str, Any]) -> dict[str, Any]:
        name = None
        if request.get("checkpoint"):
            name = "checkpoint_%06d" % self._checkpoints
            self._checkpoints += 1
        return {"ok": True, "iteration": len(self.requests), "checkpoint": name}

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            conn.settimeout(None)
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            self._answer(conn)
        except (ConnectionResetError, BrokenPipeError):
            pass  # the client went away, as tests of dropped connections make it

    def _answer(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as reader:
            for line in reader:
                with self._lock:
                    request = json.loads(line.decode("utf-8"))
                    self.requests.append(request)
                    response = self._respond(request)
                if response is None:
                    conn.shutdown(socket.SHUT_RDWR)
                    return
                conn.sendall(json.dumps(response).encode("utf-8") + b"\n")

    def close(self) -> None:
        """Stop serving and remove the socket's folder."""
        self._stop.set()
        self._thread.join()
        self._listener.close()
        shutil.rmtree(self.dir, ignore_errors=True)

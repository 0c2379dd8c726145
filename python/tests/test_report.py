"""report(): validation, encoding, rank handling and the socket protocol."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import shutil
import tempfile
import threading
import unittest
from typing import Any

import trainyard
from tests.support import HAVE_NUMPY, HAVE_TORCH, FakeServer, environment, reset_trainyard


class _ReportTestCase(unittest.TestCase):
    """Starts a fake launcher and points TRAINYARD_REPORT_SOCKET at it."""

    rank = "0"

    def setUp(self) -> None:
        reset_trainyard()
        self.addCleanup(reset_trainyard)
        self.server = self.start_server()
        self.tmp = tempfile.mkdtemp(prefix="ty-test-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        env = environment(RANK=self.rank, WORLD_SIZE="2", TRAINYARD_REPORT_SOCKET=self.server.path)
        env.__enter__()
        self.addCleanup(env.__exit__, None, None, None)

    def start_server(self, respond: Any = None) -> FakeServer:
        server = FakeServer(respond)
        self.addCleanup(server.close)
        return server

    def folder(self, *files: str) -> str:
        path = tempfile.mkdtemp(dir=self.tmp)
        for name in files:
            pathlib.Path(path, name).write_text("x")
        return path

    def sent_metrics(self, metrics: Any) -> dict[str, Any]:
        trainyard.report(metrics)
        return self.server.requests[-1]["metrics"]


class ValidationTest(_ReportTestCase):
    def assert_type_error(self, metrics: Any, message: str) -> None:
        with self.assertRaises(TypeError) as caught:
            trainyard.report(metrics)
        self.assertEqual(str(caught.exception), message)

    def test_values_that_are_not_numbers(self) -> None:
        self.assert_type_error(
            {"acc": "high"}, "report: metric 'acc' is str ('high'); metrics must be numbers"
        )
        self.assert_type_error(
            {"loss": 1.0, "ok": True}, "report: metric 'ok' is bool (True); metrics must be numbers"
        )
        self.assert_type_error(
            {"x": None}, "report: metric 'x' is NoneType (None); metrics must be numbers"
        )
        self.assert_type_error(
            {"l": [1, 2]}, "report: metric 'l' is list ([1, 2]); metrics must be numbers"
        )
        self.assert_type_error(
            {"long": "y" * 100},
            "report: metric 'long' is str ('" + "y" * 56 + "...); metrics must be numbers",
        )

    def test_names_and_container(self) -> None:
        self.assert_type_error(
            [("a", 1)], "report: metrics must be a dict of names to numbers, not list"
        )
        self.assert_type_error(
            {1: 1.0}, "report: metric name 1 is int; metric names must be strings"
        )
        with self.assertRaisesRegex(ValueError, "^report: metric names must not be empty$"):
            trainyard.report({"": 1})

    def test_checkpoint_must_be_an_existing_folder(self) -> None:
        missing = os.path.join(self.tmp, "x")
        with self.assertRaises(ValueError) as caught:
            trainyard.report({"a": 1}, checkpoint=missing)
        self.assertEqual(str(caught.exception), f"report: checkpoint {missing} does not exist")

        file = os.path.join(self.tmp, "file")
        pathlib.Path(file).write_text("x")
        with self.assertRaises(ValueError) as caught:
            trainyard.report({"a": 1}, checkpoint=file)
        self.assertEqual(
            str(caught.exception), f"report: checkpoint {file} is a file; it must be a folder"
        )

        with self.assertRaisesRegex(ValueError, "^report: checkpoint is an empty path$"):
            trainyard.report({"a": 1}, checkpoint="")
        with self.assertRaisesRegex(TypeError, "^report: checkpoint must be the path of a folder"):
            trainyard.report({"a": 1}, checkpoint=3)  # type: ignore[arg-type]

    def test_nothing_sent_when_invalid(self) -> None:
        with self.assertRaises(TypeError):
            trainyard.report({"a": 1, "b": "x"})
        self.assertEqual(self.server.requests, [])
        self.assertEqual(self.server.connections, 0)


class EncodingTest(_ReportTestCase):
    def test_python_numbers(self) -> None:
        sent = self.sent_metrics({"i": 3, "f": 0.25, "big": 2**40, "neg": -1.5})
        self.assertEqual(sent, {"i": 3, "f": 0.25, "big": 2**40, "neg": -1.5})
        self.assertIsInstance(sent["i"], int)
        self.assertIsInstance(sent["f"], float)

    def test_non_finite(self) -> None:
        sent = self.sent_metrics({"a": float("nan"), "b": float("inf"), "c": float("-inf")})
        self.assertEqual(sent, {"a": "NaN", "b": "Infinity", "c": "-Infinity"})

    def test_item(self) -> None:
        class Scalar:
            def item(self) -> float:
                return 1.5

        self.assertEqual(self.sent_metrics({"s": Scalar()}), {"s": 1.5})

    @unittest.skipUnless(HAVE_NUMPY, "needs numpy")
    def test_numpy(self) -> None:
        import numpy as np

        sent = self.sent_metrics(
            {
                "f32": np.float32(0.5),
                "f64": np.float64(0.25),
                "i64": np.int64(7),
                "one": np.array([2.0]),
                "nan": np.float32("nan"),
            }
        )
        self.assertEqual(sent, {"f32": 0.5, "f64": 0.25, "i64": 7, "one": 2.0, "nan": "NaN"})
        self.assertIsInstance(sent["i64"], int)
        with self.assertRaisesRegex(
            TypeError, r"^report: metric 'b' is numpy\.bool_? \((np\.)?True_?\); metrics must be numbers$"
        ):
            trainyard.report({"b": np.bool_(True)})
        with self.assertRaisesRegex(
            TypeError, r"^report: metric 'v' is numpy\.ndarray \(array\(\[1\., 2\.\]\)\); metrics"
        ):
            trainyard.report({"v": np.array([1.0, 2.0])})

    @unittest.skipUnless(HAVE_TORCH, "needs torch")
    def test_torch(self) -> None:
        import torch

        sent = self.sent_metrics(
            {
                "loss": torch.tensor(0.5),
                "n": torch.tensor(4),
                "one": torch.tensor([1.5]),
                "inf": torch.tensor(float("inf")),
            }
        )
        self.assertEqual(sent, {"loss": 0.5, "n": 4, "one": 1.5, "inf": "Infinity"})
        with self.assertRaisesRegex(
            TypeError,
            r"^report: metric 'v' is torch\.Tensor \(tensor\(\[1\., 2\.\]\)\); metrics must be numbers$",
        ):
            trainyard.report({"v": torch.tensor([1.0, 2.0])})
        with self.assertRaisesRegex(TypeError, r"^report: metric 'b' is torch\.Tensor \(tensor\(True\)\)"):
            trainyard.report({"b": torch.tensor(True)})


class ProtocolTest(_ReportTestCase):
    def test_round_trip(self) -> None:
        checkpoint = self.folder("model.pt")
        first = trainyard.report({"loss": 0.5})
        second = trainyard.report({"loss": 0.25}, checkpoint=pathlib.Path(checkpoint))
        self.assertEqual(first, trainyard.ReportResult(iteration=1, checkpoint=None))
        self.assertEqual(
            second, trainyard.ReportResult(iteration=2, checkpoint="checkpoint_000000")
        )
        self.assertEqual(
            self.server.requests,
            [
                {"op": "report", "rank": 0, "metrics": {"loss": 0.5}, "checkpoint": None},
                {"op": "report", "rank": 0, "metrics": {"loss": 0.25}, "checkpoint": checkpoint},
            ],
        )
        self.assertEqual(self.server.connections, 1)  # one connection, kept

    def test_relative_checkpoint_is_sent_absolute(self) -> None:
        checkpoint = self.folder()
        cwd = os.getcwd()
        os.chdir(os.path.dirname(checkpoint))
        self.addCleanup(os.chdir, cwd)
        trainyard.report({"a": 1}, checkpoint=os.path.basename(checkpoint))
        self.assertEqual(self.server.requests[-1]["checkpoint"], checkpoint)

    def test_threads_share_the_connection(self) -> None:
        results: list[int] = []
        lock = threading.Lock()

        def work() -> None:
            for i in range(20):
                result = trainyard.report({"i": i})
                with lock:
                    results.append(result.iteration)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(sorted(results), list(range(1, 161)))
        self.assertEqual(self.server.connections, 1)

    def test_error_response(self) -> None:
        server = self.start_server(
            lambda request: {"ok": False, "error": "checkpoint is on another filesystem"}
        )
        os.environ["TRAINYARD_REPORT_SOCKET"] = server.path
        with self.assertRaises(trainyard.ReportError) as caught:
            trainyard.report({"a": 1})
        self.assertEqual(str(caught.exception), "checkpoint is on another filesystem")
        self.assertIsInstance(caught.exception, RuntimeError)

    def test_pipelined_error_raised_at_next_call(self) -> None:
        answers = iter([{"ok": True, "iteration": 1, "checkpoint": None},
                        {"ok": False, "error": "disk full"}])
        server = self.start_server(
            lambda request: next(answers, {"ok": True, "iteration": 9, "checkpoint": None})
        )
        os.environ["TRAINYARD_REPORT_SOCKET"] = server.path
        self.assertEqual(trainyard.report({"a": 1}).iteration, 1)  # waited for: the first
        self.assertEqual(trainyard.report({"a": 2}).iteration, 2)  # pipelined: predicted
        with self.assertRaises(trainyard.ReportError) as caught:
            trainyard._report._client.flush()
        self.assertEqual(str(caught.exception), "report of iteration 2: disk full")

    def test_invalid_response(self) -> None:
        server = self.start_server(lambda request: {"ok": True, "iteration": "one"})
        os.environ["TRAINYARD_REPORT_SOCKET"] = server.path
        with self.assertRaisesRegex(trainyard.ReportError, "invalid response"):
            trainyard.report({"a": 1})

    def test_no_server(self) -> None:
        path = os.path.join(self.tmp, "gone.sock")
        os.environ["TRAINYARD_REPORT_SOCKET"] = path
        with self.assertRaises(trainyard.ReportError) as caught:
            trainyard.report({"a": 1})
        self.assertIn(f"TRAINYARD_REPORT_SOCKET={path}", str(caught.exception))
        self.assertTrue(
            str(caught.exception).startswith("report: cannot reach the trainyard launcher")
        )

    def test_server_closes_connection(self) -> None:
        calls = []

        def respond(request: dict[str, Any]) -> dict[str, Any] | None:
            calls.append(request)
            if len(calls) == 1:
                return None  # hang up without answering
            return {"ok": True, "iteration": len(calls), "checkpoint": None}

        server = self.start_server(respond)
        os.environ["TRAINYARD_REPORT_SOCKET"] = server.path
        with self.assertRaises(trainyard.ReportError) as caught:
            trainyard.report({"a": 1})
        self.assertIn("closed the connection", str(caught.exception))
        self.assertIn(f"TRAINYARD_REPORT_SOCKET={server.path}", str(caught.exception))
        # The next report connects again.
        self.assertEqual(trainyard.report({"a": 2}).iteration, 2)
        self.assertEqual(server.connections, 2)

    def test_server_gone_after_connecting(self) -> None:
        trainyard.report({"a": 1})
        self.server.close()
        trainyard._report._client._sock.shutdown(2)  # the launcher's end went away
        with self.assertRaises(trainyard.ReportError) as caught:
            trainyard.report({"a": 2})
        self.assertIn("TRAINYARD_REPORT_SOCKET", str(caught.exception))

    @unittest.skipUnless(hasattr(os, "fork"), "needs fork")
    def test_forked_child_opens_its_own_connection(self) -> None:
        trainyard.report({"a": 1})
        pid = os.fork()
        if pid == 0:
            try:
                code = 0 if trainyard.report({"child": 1}).iteration == 2 else 1
            except BaseException:
                code = 2
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        self.assertEqual(self.server.connections, 2)
        # The parent's connection still works; its count is its own (the fake server counts
        # every request, the child's too, so the answer says 3).
        self.assertEqual(trainyard.report({"a": 3}).iteration, 2)
        trainyard._report._client.flush()
        self.assertEqual(self.server.requests[-1]["metrics"], {"a": 3})


class OtherRankTest(_ReportTestCase):
    rank = "1"

    def test_empty_checkpoint_ignored_silently(self) -> None:
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            result = trainyard.report({"a": 1}, checkpoint=self.folder())
        self.assertEqual(result.checkpoint, None)
        self.assertEqual(self.server.requests[-1]["checkpoint"], None)
        self.assertEqual(self.server.requests[-1]["rank"], 1)
        self.assertEqual(stderr.getvalue(), "")

    def test_checkpoint_with_files_sent(self) -> None:
        folder = self.folder("shard-1.pt")
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            result = trainyard.report({"a": 1}, checkpoint=folder)
        self.assertEqual(self.server.requests[-1]["checkpoint"], folder)
        self.assertEqual(result.checkpoint, "checkpoint_000000")
        self.assertEqual(stderr.getvalue(), "")

    def test_missing_checkpoint_still_an_error(self) -> None:
        with self.assertRaisesRegex(ValueError, "does not exist"):
            trainyard.report({"a": 1}, checkpoint=os.path.join(self.tmp, "nope"))


class WithoutLauncherTest(unittest.TestCase):
    def setUp(self) -> None:
        reset_trainyard()

    def test_prints_metrics_once_per_call(self) -> None:
        stderr = io.StringIO()
        with tempfile.TemporaryDirectory() as local, environment(TRAINYARD_LOCAL_DIR=local), \
                contextlib.redirect_stderr(stderr):
            first = trainyard.report({"loss": 0.5, "epoch": 1})
            second = trainyard.report({"loss": float("nan")})
            with open(os.path.join(local, "result.json")) as f:
                records = [json.loads(line) for line in f]
        lines = stderr.getvalue().splitlines()
        self.assertEqual(lines[0], 'trainyard.report: {"loss": 0.5, "epoch": 1}')
        self.assertIn(f"rank 0's metrics and checkpoints are kept in {local}", lines[1])  # said once
        self.assertEqual(lines[2:], ['trainyard.report: {"loss": "NaN"}'])
        self.assertEqual(second.iteration, first.iteration + 1)
        self.assertIsNone(second.checkpoint)
        self.assertEqual([(r["training_iteration"], r["loss"]) for r in records], [(first.iteration, 0.5), (second.iteration, "NaN")])

    def test_checkpoints_kept_locally(self) -> None:
        """As Ray Train's local mode: rank 0's checkpoint folders move into the local folder."""
        stderr = io.StringIO()
        with tempfile.TemporaryDirectory() as local, tempfile.TemporaryDirectory() as folder, \
                environment(TRAINYARD_LOCAL_DIR=local), contextlib.redirect_stderr(stderr):
            for epoch in (1, 2):
                with open(os.path.join(folder, "model.pt"), "w") as f:
                    f.write(f"epoch {epoch}")
                result = trainyard.report({"epoch": epoch}, checkpoint=folder)
                self.assertEqual(result.checkpoint, f"checkpoint_00000{epoch}")
                self.assertEqual(os.listdir(folder), [])  # handed over, as under trainyard
            with open(os.path.join(local, "checkpoint_000002", "model.pt")) as f:
                self.assertEqual(f.read(), "epoch 2")
            with open(os.path.join(local, "result.json")) as f:
                self.assertEqual([json.loads(line)["checkpoint"] for line in f], ["checkpoint_000001", "checkpoint_000002"])
        with tempfile.TemporaryDirectory() as local, tempfile.TemporaryDirectory() as folder, \
                environment(TRAINYARD_LOCAL_DIR=local, RANK="1", WORLD_SIZE="2"), contextlib.redirect_stderr(stderr):
            open(os.path.join(folder, "shard-1.pt"), "w").close()
            self.assertIsNone(trainyard.report({"a": 1}, checkpoint=folder).checkpoint)
            self.assertEqual(os.listdir(folder), ["shard-1.pt"])  # another rank's: left alone
            self.assertEqual(os.listdir(local), [])
        self.assertIn("only rank 0's checkpoints are kept", stderr.getvalue())

    def test_validation_still_applies(self) -> None:
        with environment(), self.assertRaises(TypeError):
            trainyard.report({"acc": "high"})


if __name__ == "__main__":
    unittest.main()

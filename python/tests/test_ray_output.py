"""Ray's "Training result" and "Training config" tables (ray.train._output)."""

from __future__ import annotations

import io
import os
import sys
import unittest
from unittest import mock

_COMPAT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "compat")
if _COMPAT not in sys.path:
    sys.path.append(_COMPAT)

from ray.train import _output  # noqa: E402

# As Ray's logs show it, in KubeRay's Fashion-MNIST guide (the first report).
RAY_RESULT = """\
╭───────────────────────────────╮
│ Training result               │
├───────────────────────────────┤
│ checkpoint_dir_name           │
│ time_this_iter_s        144.9 │
│ time_total_s            144.9 │
│ training_iteration          1 │
│ accuracy                0.805 │
│ loss                  0.52336 │
╰───────────────────────────────╯"""

# As Ray's logs show it in its fine-tuning guide, with a checkpoint.
RAY_RESULT_CHECKPOINT = """\
╭─────────────────────────────────────────╮
│ Training result                         │
├─────────────────────────────────────────┤
│ checkpoint_dir_name   checkpoint_000009 │
│ time_this_iter_s                6.47154 │
│ time_total_s                    74.5547 │
│ training_iteration                   10 │
│ acc                             0.24183 │
│ loss                            0.06882 │
╰─────────────────────────────────────────╯"""


class TableTest(unittest.TestCase):
    def test_result_table_matches_rays(self) -> None:
        result = {"loss": 0.523360, "accuracy": 0.805, "training_iteration": 1,
                  "time_total_s": 144.9, "time_this_iter_s": 144.9, "checkpoint_dir_name": None}
        self.assertEqual(_output.table("Training result", _output.result_rows(result)), RAY_RESULT)

    def test_result_table_with_a_checkpoint(self) -> None:
        result = {"acc": 0.241831, "loss": 0.068819, "training_iteration": 10, "time_total_s": 74.5547,
                  "time_this_iter_s": 6.471541, "checkpoint_dir_name": "checkpoint_000009",
                  "pid": 42, "timestamp": 1, "date": "x"}  # hidden, as Ray hides them
        self.assertEqual(_output.table("Training result", _output.result_rows(result)), RAY_RESULT_CHECKPOINT)

    def test_nested_values(self) -> None:
        rows = _output.result_rows({"eval": {"acc": 0.5, "n": 3}, "tags": [1, 2]})
        self.assertEqual(rows, [("eval", ""), ("eval/acc", "0.5"), ("eval/n", "3"), ("tags", "[1, 2]")])

    def test_running_time(self) -> None:
        for seconds, want in ((7, "7s"), (262, "4min 22s"), (3605, "1hr 0min 5s"), (90061, "1d 1hr 1min 1s")):
            self.assertEqual(_output.running_time(seconds), want)


class PrinterTest(unittest.TestCase):
    def test_lines_of_a_fit(self) -> None:
        out = io.StringIO()
        p = _output.Printer(enabled=True, out=out)
        p.started({"lr": 0.001, "epochs": 10})
        p.reported(1, {"loss": 0.5}, None, None)
        p.reported(2, {"loss": 0.25}, "checkpoint_000002", "/runs/x/checkpoint_000002")
        p.completed()
        text = out.getvalue()
        self.assertIn("Training started with configuration:\n╭", text)
        self.assertIn("│ train_loop_config/epochs      10 │", text)
        self.assertRegex(text, r"Training finished iteration 1 at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\. "
                               r"Total running time: \d+s\n╭")
        self.assertIn("│ checkpoint_dir_name   checkpoint_000002 │", text)
        self.assertIn("Training saved a checkpoint for iteration 2 at: (local)/runs/x/checkpoint_000002", text)
        with mock.patch.dict(os.environ, TRAINYARD_STORAGE_PATH="s3://bucket/exp"):  # as Ray names a bucket's
            self.assertEqual(_output._where("/stage/s3/bucket/exp/x/checkpoint_000002"), "(s3)bucket/exp/x/checkpoint_000002")
        self.assertRegex(text, r"Training completed after 2 iterations at .*\. Total running time: \d+s\n$")

    def test_without_configuration_and_disabled(self) -> None:
        out = io.StringIO()
        _output.Printer(enabled=True, out=out).started(None)
        self.assertEqual(out.getvalue(), "Training started without custom configuration.\n")
        quiet = io.StringIO()
        p = _output.Printer(enabled=False, out=quiet)
        p.started({"a": 1})
        p.reported(1, {"loss": 1.0}, None, None)
        p.completed()
        self.assertEqual(quiet.getvalue(), "")


if __name__ == "__main__":
    unittest.main()

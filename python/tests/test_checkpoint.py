"""new_checkpoint_dir() and get_checkpoint()."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
import unittest

import trainyard
from tests.support import environment, reset_trainyard


class NewCheckpointDirTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="ty-test-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def test_under_scratch_dir_unique_and_empty(self) -> None:
        scratch = os.path.join(self.tmp, "scratch")
        with environment(TRAINYARD_SCRATCH_DIR=scratch, TRAINYARD_RUN_DIR=self.tmp):
            paths = [trainyard.new_checkpoint_dir() for _ in range(20)]
        self.assertEqual(len(set(paths)), 20)
        for path in paths:
            self.assertTrue(os.path.isabs(path))
            self.assertTrue(os.path.isdir(path))
            self.assertEqual(os.listdir(path), [])
            self.assertEqual(os.path.dirname(path), scratch)

    def test_under_run_dir(self) -> None:
        with environment(TRAINYARD_RUN_DIR=self.tmp, RANK="3"):
            path = trainyard.new_checkpoint_dir()
        self.assertEqual(os.path.dirname(path), os.path.join(self.tmp, ".scratch", "rank-3"))
        self.assertEqual(os.listdir(path), [])

    def test_without_trainyard(self) -> None:
        with environment():
            path = trainyard.new_checkpoint_dir()
        self.addCleanup(shutil.rmtree, path, True)
        self.assertTrue(os.path.isdir(path))
        self.assertEqual(os.listdir(path), [])
        self.assertEqual(os.path.dirname(path), os.path.abspath(tempfile.gettempdir()))


class GetCheckpointTest(unittest.TestCase):
    def setUp(self) -> None:
        reset_trainyard()

    def test_unset(self) -> None:
        with environment():
            self.assertIsNone(trainyard.get_checkpoint())

    def test_existing_folder(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            with environment(TRAINYARD_CHECKPOINT=folder):
                self.assertEqual(trainyard.get_checkpoint(), folder)

    def test_missing_folder(self) -> None:
        stderr = io.StringIO()
        with environment(TRAINYARD_CHECKPOINT="/nonexistent/checkpoint_000001"):
            with contextlib.redirect_stderr(stderr):
                self.assertIsNone(trainyard.get_checkpoint())
        self.assertIn("TRAINYARD_CHECKPOINT=/nonexistent/checkpoint_000001", stderr.getvalue())


if __name__ == "__main__":
    unittest.main()

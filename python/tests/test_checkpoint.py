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


def _id(path: str) -> str:
    st = os.stat(path)
    return f"{st.st_dev}:{st.st_ino}"


class RunFolderChecksTest(unittest.TestCase):
    """The helper hands out nothing of a run folder that someone put in its place."""

    def setUp(self) -> None:
        reset_trainyard()
        self.tmp = tempfile.mkdtemp(prefix="ty-test-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.run_dir = os.path.join(self.tmp, "run")
        os.mkdir(self.run_dir)
        self.run_id = _id(self.run_dir)

    def swap(self) -> None:
        """Rename the run folder away and put another folder in its place."""
        os.rename(self.run_dir, self.run_dir + ".moved")
        os.mkdir(self.run_dir)

    def test_new_checkpoint_dir_in_the_folder_the_launcher_opened(self) -> None:
        with environment(TRAINYARD_RUN_DIR=self.run_dir, TRAINYARD_RUN_DIR_ID=self.run_id, RANK="1"):
            path = trainyard.new_checkpoint_dir()
            self.assertEqual(os.path.dirname(path), os.path.join(self.run_dir, ".scratch", "rank-1"))
            self.swap()
            with self.assertRaisesRegex(trainyard.RunFolderError, "was replaced while the run ran"):
                trainyard.new_checkpoint_dir()
        self.assertEqual(os.listdir(self.run_dir), [])

    def test_new_checkpoint_dir_refuses_a_linked_scratch_folder(self) -> None:
        elsewhere = os.path.join(self.tmp, "elsewhere")
        os.mkdir(elsewhere)
        os.symlink(elsewhere, os.path.join(self.run_dir, ".scratch"))
        with environment(TRAINYARD_RUN_DIR=self.run_dir, TRAINYARD_RUN_DIR_ID=self.run_id):
            with self.assertRaisesRegex(trainyard.RunFolderError, "symbolic link"):
                trainyard.new_checkpoint_dir()
        self.assertEqual(os.listdir(elsewhere), [])

    def test_get_checkpoint_only_from_the_folder_the_launcher_opened(self) -> None:
        ckpt = os.path.join(self.run_dir, "checkpoint_000001")
        os.mkdir(ckpt)
        env = {"TRAINYARD_RUN_DIR": self.run_dir, "TRAINYARD_RUN_DIR_ID": self.run_id, "TRAINYARD_CHECKPOINT": ckpt}
        with environment(**env):
            self.assertEqual(trainyard.get_checkpoint(), ckpt)
            self.swap()
            os.mkdir(ckpt)  # a checkpoint planted in the folder put in the run folder's place
            with self.assertRaisesRegex(trainyard.RunFolderError, "was replaced while the run ran"):
                trainyard.get_checkpoint()

    def test_get_checkpoint_refuses_a_link(self) -> None:
        ckpt = os.path.join(self.run_dir, "checkpoint_000001")
        os.symlink(self.tmp, ckpt)
        with environment(TRAINYARD_RUN_DIR=self.run_dir, TRAINYARD_CHECKPOINT=ckpt):
            with self.assertRaisesRegex(trainyard.RunFolderError, "symbolic link"):
                trainyard.get_checkpoint()

    @unittest.skipUnless(hasattr(os, "geteuid") and os.geteuid() == 0, "chown to another user needs root")
    def test_get_checkpoint_refuses_another_users_folder(self) -> None:
        ckpt = os.path.join(self.run_dir, "checkpoint_000500")
        os.mkdir(ckpt)
        os.chown(ckpt, 12345, 12345)
        with environment(TRAINYARD_RUN_DIR=self.run_dir, TRAINYARD_RUN_DIR_ID=self.run_id, TRAINYARD_CHECKPOINT=ckpt):
            with self.assertRaisesRegex(trainyard.RunFolderError, "belongs to uid 12345"):
                trainyard.get_checkpoint()


if __name__ == "__main__":
    unittest.main()

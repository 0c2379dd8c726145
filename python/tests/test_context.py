"""get_context(): the launcher's variables, and the defaults without them."""

from __future__ import annotations

import subprocess
import sys
import unittest

import trainyard
from tests.support import clean_env, environment


class ContextTest(unittest.TestCase):
    def test_from_environment(self) -> None:
        with environment(
            RANK="5",
            LOCAL_RANK="1",
            WORLD_SIZE="8",
            LOCAL_WORLD_SIZE="4",
            GROUP_RANK="1",
            TRAINYARD_RUN_NAME="lr-0.01",
            TRAINYARD_STORAGE_PATH="/results",
            TRAINYARD_RUN_DIR="/results/lr-0.01",
            TRAINYARD_ATTEMPT="3",
        ):
            ctx = trainyard.get_context()
        self.assertEqual(
            ctx,
            trainyard.Context(
                rank=5,
                local_rank=1,
                world_size=8,
                local_world_size=4,
                node_rank=1,
                run_name="lr-0.01",
                storage_path="/results",
                run_dir="/results/lr-0.01",
                attempt=3,
            ),
        )

    def test_elastic_gang(self) -> None:
        with environment(WORLD_SIZE="2", TRAINYARD_MIN_WORKERS="2", TRAINYARD_MAX_WORKERS="4",
                         TRAINYARD_PREVIOUS_WORLD_SIZE="3"):
            ctx = trainyard.get_context()
        self.assertEqual((ctx.world_size, ctx.min_workers, ctx.max_workers, ctx.previous_world_size), (2, 2, 4, 3))
        with environment(WORLD_SIZE="2"):
            ctx = trainyard.get_context()
        self.assertEqual((ctx.min_workers, ctx.max_workers, ctx.previous_world_size), (None, None, None))

    def test_defaults_without_environment(self) -> None:
        with environment():
            ctx = trainyard.get_context()
        self.assertEqual(ctx, trainyard.Context())
        self.assertEqual((ctx.rank, ctx.world_size, ctx.attempt), (0, 1, 1))
        self.assertIsNone(ctx.run_name)
        self.assertIsNone(ctx.run_dir)

    def test_frozen(self) -> None:
        ctx = trainyard.Context()
        with self.assertRaises(AttributeError):
            ctx.rank = 1  # type: ignore[misc]

    def test_bad_integer(self) -> None:
        with environment(RANK="zero"):
            with self.assertRaisesRegex(ValueError, r"^trainyard: RANK='zero' is not an integer$"):
                trainyard.get_context()

    def test_import_does_not_import_torch(self) -> None:
        code = "import sys, trainyard; print('torch' in sys.modules, trainyard.get_context().rank)"
        out = subprocess.run(
            [sys.executable, "-c", code],
            env=clean_env(),
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        self.assertEqual(out, "False 0\n")


if __name__ == "__main__":
    unittest.main()

"""The ray compatibility package (python/compat/ray): ray.*, ray.train and ray.train.torch."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import tempfile
import unittest
from unittest import mock

from tests.support import HAVE_TORCH, FakeServer, environment, free_port, reset_trainyard

_COMPAT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "compat")
if _COMPAT not in sys.path:
    sys.path.append(_COMPAT)

import ray  # noqa: E402
from ray import train  # noqa: E402
from ray.train import _result, _session  # noqa: E402


class PreemptionInfoTest(unittest.TestCase):
    def test_get_preemption_info(self) -> None:
        from trainyard import _preempt  # pylint: disable=import-outside-toplevel

        _preempt._seen = None
        self.addCleanup(setattr, _preempt, "_seen", None)
        path = os.path.join(tempfile.mkdtemp(), "preemption.json")
        with environment(TRAINYARD_PREEMPTION_FILE=path, WORLD_SIZE="3", RANK="1"):
            self.assertIsNone(train.get_preemption_info())
            with open(path, "w", encoding="utf-8") as f:
                f.write('{"deadline": 1795743377.5, "reason": "preempted by job hi (priority 5)"}')
            info = train.get_preemption_info()
        self.assertEqual(info, train.PreemptionInfo(deadline=1795743377.5, reason="preempted by job hi (priority 5)",
                                                    affected_ranks=[0, 1, 2]))


class CoreTest(unittest.TestCase):
    def tearDown(self) -> None:
        ray.shutdown()

    def test_init_shutdown(self) -> None:
        self.assertFalse(ray.is_initialized())
        info = ray.init(address="auto", num_cpus=3, runtime_env={"pip": ["x"]})
        self.assertTrue(ray.is_initialized())
        self.assertIn("node_ip_address", info.address_info)
        with self.assertRaisesRegex(RuntimeError, "ignore_reinit_error"):
            ray.init()
        ray.init(ignore_reinit_error=True)
        ray.shutdown()
        self.assertFalse(ray.is_initialized())

    def test_resources_use_ray_keys(self) -> None:
        with environment(CUDA_VISIBLE_DEVICES="0,1"):
            got = ray.cluster_resources()
        self.assertEqual(got["GPU"], 2.0)
        self.assertGreaterEqual(got["CPU"], 1.0)
        self.assertGreater(got["memory"], 0.0)
        self.assertEqual([k for k in got if k.startswith("node:") and k != "node:__internal_head__"].__len__(), 1)
        self.assertEqual(ray.available_resources().keys(), got.keys())

    def test_no_visible_gpu(self) -> None:
        for value in ("", "void", "-1"):
            with environment(CUDA_VISIBLE_DEVICES=value):
                self.assertEqual(ray.cluster_resources()["GPU"], 0.0, value)

    def test_train_is_lazy_attribute(self) -> None:
        self.assertIs(ray.train, train)
        with self.assertRaisesRegex(AttributeError, "ray.train only"):
            ray.tune  # noqa: B018


class ConfigTest(unittest.TestCase):
    def test_defaults(self) -> None:
        self.assertEqual(train.ScalingConfig().num_workers, 1)
        rc = train.RunConfig(name="x")
        self.assertEqual(rc.failure_config.max_failures, 0)
        self.assertIsNone(rc.checkpoint_config.num_to_keep)

    def test_bad_values_say_what_to_fix(self) -> None:
        cases = {
            "num_workers must be an integer of 1 or more": lambda: train.ScalingConfig(num_workers=0),
            "num_to_keep": lambda: train.CheckpointConfig(num_to_keep=0),
            "max.*min": lambda: train.CheckpointConfig(checkpoint_score_order="up"),
            "-1 \\(unlimited\\)": lambda: train.FailureConfig(max_failures=-2),
        }
        for want, make in cases.items():
            with self.subTest(want), self.assertRaisesRegex(ValueError, want):
                make()

    def test_gpus_per_worker(self) -> None:
        self.assertEqual(train.ScalingConfig(use_gpu=True).gpus_per_worker, 1.0)
        self.assertEqual(train.ScalingConfig(resources_per_worker={"GPU": 2}).gpus_per_worker, 2.0)
        self.assertEqual(train.ScalingConfig(num_workers=2, use_gpu=True).total_resources, {"CPU": 2.0, "GPU": 2.0})


class CheckpointTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="ty-ray-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def test_directory_round_trip(self) -> None:
        src = os.path.join(self.tmp, "src")
        os.mkdir(src)
        with open(os.path.join(src, "model.pt"), "w") as f:
            f.write("weights")
        ckpt = train.Checkpoint.from_directory(src)
        self.assertEqual(ckpt.path, src)
        with ckpt.as_directory() as d:
            self.assertEqual(d, src)
        out = ckpt.to_directory(os.path.join(self.tmp, "out"))
        with open(os.path.join(out, "model.pt")) as f:
            self.assertEqual(f.read(), "weights")
        ckpt.update_metadata({"epoch": 3})
        self.assertEqual(train.Checkpoint(src).get_metadata(), {"epoch": 3})

    def test_remote_filesystem_refused(self) -> None:
        with self.assertRaisesRegex(ValueError, "local folders only"):
            train.Checkpoint("s3://bucket/x", filesystem=object())


class ResultTest(unittest.TestCase):
    def test_repr_is_rays(self) -> None:
        ckpt = train.Checkpoint("/runs/exp/checkpoint_000002")
        result = train.Result(metrics={"loss": 0.25, "epoch": 2}, checkpoint=ckpt, path="/runs/exp")
        self.assertEqual(repr(result), (
            "Result(\n"
            "  metrics={'loss': 0.25, 'epoch': 2},\n"
            "  path='/runs/exp',\n"
            "  filesystem='local',\n"
            "  checkpoint=Checkpoint(filesystem=local, path=/runs/exp/checkpoint_000002)\n"
            ")"
        ))
        failed = train.Result(metrics=None, checkpoint=None, path="/runs/exp", error=ValueError("x"))
        self.assertEqual(repr(failed).splitlines()[:2], ["Result(", "  error='ValueError',"])

    def test_filesystem_is_the_local_one(self) -> None:
        import types
        from unittest import mock

        result = train.Result(metrics=None, checkpoint=None, path=self.id())
        with mock.patch.dict(sys.modules, {"pyarrow": None, "pyarrow.fs": None}):
            fs = result.filesystem  # without pyarrow: the stand-in
        self.assertEqual((fs.type_name, fs), ("local", _result.LocalFileSystem()))
        folder = tempfile.mkdtemp(prefix="ty-ray-")
        self.addCleanup(shutil.rmtree, folder, True)
        with fs.open_output_stream(os.path.join(folder, "f")) as f:
            f.write(b"data")
        with fs.open_input_stream(os.path.join(folder, "f")) as f:
            self.assertEqual(f.readall(), b"data")
        pyarrow_fs = types.ModuleType("pyarrow.fs")
        pyarrow_fs.LocalFileSystem = type("LocalFileSystem", (), {"type_name": "local"})
        pyarrow = types.ModuleType("pyarrow")
        pyarrow.fs = pyarrow_fs
        with mock.patch.dict(sys.modules, {"pyarrow": pyarrow, "pyarrow.fs": pyarrow_fs}):
            self.assertIsInstance(result.filesystem, pyarrow_fs.LocalFileSystem)  # Ray's type, where installed


class SessionTest(unittest.TestCase):
    def setUp(self) -> None:
        reset_trainyard()
        self.addCleanup(reset_trainyard)
        self.server = FakeServer()
        self.addCleanup(self.server.close)
        self.tmp = tempfile.mkdtemp(prefix="ty-ray-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        env = environment(RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", GROUP_RANK="0",
                          TRAINYARD_REPORT_SOCKET=self.server.path, TRAINYARD_RUN_NAME="mnist",
                          TRAINYARD_RUN_DIR=self.tmp, TRAINYARD_STORAGE_PATH=os.path.dirname(self.tmp))
        env.__enter__()
        self.addCleanup(env.__exit__, None, None, None)
        self.session = _session.Session(experiment_name="ignored")
        _session._open(self.session)
        self.addCleanup(_session._open, _session.Session())

    def test_report_delegates_to_trainyard(self) -> None:
        folder = tempfile.mkdtemp(dir=self.tmp)
        with open(os.path.join(folder, "state.pt"), "w") as f:
            f.write("x")
        train.report({"loss": 0.5, "note": "text"}, checkpoint=train.Checkpoint.from_directory(folder))
        request = self.server.requests[-1]
        self.assertEqual(request["metrics"], {"loss": 0.5})  # strings stay out of trainyard's results
        self.assertEqual(request["checkpoint"], folder)
        self.assertEqual(self.session.last_metrics, {"loss": 0.5, "note": "text"})
        self.assertEqual(self.session.last_checkpoint, "checkpoint_000000")

    def test_upload_modes(self) -> None:
        """In a bucket, SYNC (the default) waits for the uploader's record of the checkpoint
        (and raises when its upload failed); ASYNC does not wait; in a folder nothing waits."""
        def ck() -> train.Checkpoint:
            folder = tempfile.mkdtemp(dir=self.tmp)
            open(os.path.join(folder, "state.pt"), "w").close()
            return train.Checkpoint.from_directory(folder)

        status = os.path.join(self.tmp, ".trainyard-uploads.json")
        with open(status, "w") as f:
            f.write('{"uploaded": 0, "failed": %s}' % list(range(100)))  # every upload failed
        train.report({"loss": 1}, checkpoint=ck())  # in a folder: nothing to wait for
        with mock.patch.dict(os.environ, TRAINYARD_STORAGE_PATH="s3://bucket/runs"):
            train.report({"loss": 1}, checkpoint=ck(), checkpoint_upload_mode=train.CheckpointUploadMode.ASYNC)
            with self.assertRaisesRegex(RuntimeError, r"checkpoint_\d{6} could not be uploaded to s3://bucket/runs"):
                train.report({"loss": 1}, checkpoint=ck())
            with open(status, "w") as f:
                f.write('{"uploaded": 100, "failed": []}')
            train.report({"loss": 1}, checkpoint=ck(), checkpoint_upload_mode="SYNC")
            with self.assertRaises(ValueError):
                train.report({"loss": 1}, checkpoint_upload_mode="LATER")

    def test_get_checkpoint(self) -> None:
        self.assertIsNone(train.get_checkpoint())
        self.session.resume_from = train.Checkpoint(self.tmp)
        self.assertEqual(train.get_checkpoint(), train.Checkpoint(self.tmp))
        with environment(TRAINYARD_CHECKPOINT=self.tmp):
            self.assertEqual(train.get_checkpoint().path, self.tmp)

    def test_context(self) -> None:
        ctx = train.get_context()
        got = (ctx.get_world_size(), ctx.get_world_rank(), ctx.get_local_rank(), ctx.get_local_world_size(),
               ctx.get_node_rank(), ctx.get_experiment_name(), ctx.get_trial_name())
        self.assertEqual(got, (2, 0, 0, 1, 0, "mnist", "mnist"))


def restorable_loop(config):  # a top-level loop, which restore() finds by its name
    return config


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class PrepareDataLoaderTest(unittest.TestCase):
    """The sampler's epoch is the script's, as in Ray: prepare_data_loader never sets it."""

    def setUp(self) -> None:
        reset_trainyard()
        self.addCleanup(reset_trainyard)

    def _loader(self, rank: int) -> tuple[object, object]:
        import torch
        from ray.train.torch import prepare_data_loader
        from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

        data = TensorDataset(torch.arange(32))
        with environment(RANK=str(rank), WORLD_SIZE="2"):
            loader = prepare_data_loader(DataLoader(data, batch_size=4, shuffle=True))
        return loader, DistributedSampler(data, num_replicas=2, rank=rank, shuffle=True)

    def test_resumed_at_epoch_3_shuffles_as_epoch_3(self) -> None:
        for rank in (0, 1):
            loader, reference = self._loader(rank)
            seen = []
            for epoch in range(3, 5):  # a run resumed from its checkpoint of epoch 2
                loader.sampler.set_epoch(epoch)
                reference.set_epoch(epoch)
                seen.append(([int(v) for (x,) in loader for v in x], list(reference)))
            for got, want in seen:
                self.assertEqual(got, want, f"rank {rank}")
            self.assertNotEqual(seen[0][0], seen[1][0])

    def test_without_set_epoch_every_epoch_is_epoch_0(self) -> None:
        loader, reference = self._loader(0)
        first, second = ([int(v) for (x,) in loader for v in x] for _ in range(2))
        self.assertEqual(first, list(reference))
        self.assertEqual(second, first)
        self.assertEqual(loader.sampler.epoch, 0)
        loader.set_epoch(7)  # Trainyard's wrapper: the same as loader.sampler.set_epoch(7)
        self.assertEqual(loader.sampler.epoch, 7)


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class TrainerTest(unittest.TestCase):
    def setUp(self) -> None:
        reset_trainyard()
        self.addCleanup(reset_trainyard)
        env = environment()
        env.__enter__()
        self.addCleanup(env.__exit__, None, None, None)
        self.addCleanup(_session._open, _session.Session())

    def test_many_workers_without_a_gang_say_how_to_start_one(self) -> None:
        from ray.train.torch import TorchTrainer

        trainer = TorchTrainer(lambda: None, scaling_config=train.ScalingConfig(num_workers=4))
        with self.assertRaisesRegex(RuntimeError, "trainyard run --workers 4 -- python3"):
            trainer.fit()

    def test_loop_with_and_without_config(self) -> None:
        import torch.distributed as dist
        from ray.train.torch import TorchTrainer

        seen = []

        def with_config(config):
            seen.append(config)
            train.report({"step": 1})

        os.environ["MASTER_PORT"] = str(free_port())
        with contextlib.redirect_stderr(io.StringIO()):
            result = TorchTrainer(with_config, train_loop_config={"lr": 0.1}).fit()
            TorchTrainer(lambda: seen.append("none")).fit()
        # fit() leaves the process group when the loop ends, as Ray's TorchConfig does.
        self.assertFalse(dist.is_initialized())
        self.assertEqual(seen, [{"lr": 0.1}, "none"])
        self.assertEqual(result.metrics, {"step": 1})
        self.assertIsNone(result.checkpoint)
        with self.assertRaisesRegex(ValueError, "0 or 1 arguments"):
            TorchTrainer(lambda a, b: None)

    def test_restore_keeps_the_runs_configs(self) -> None:
        from ray.train import _driver
        from ray.train.torch import TorchTrainer

        storage = tempfile.mkdtemp(prefix="ty-ray-")
        self.addCleanup(shutil.rmtree, storage, True)
        run = os.path.join(storage, "exp")
        os.mkdir(run)
        with open(os.path.join(run, "run.json"), "w", encoding="utf-8") as f:
            f.write('{"name": "exp", "attempts": [{"ranks": [{}]}]}')
        trainer = TorchTrainer(
            restorable_loop,
            train_loop_config={"lr": 0.1, "layers": [2, 3]},
            scaling_config=train.ScalingConfig(num_workers=1, resources_per_worker={"CPU": 2}),
            run_config=train.RunConfig(
                name="exp", storage_path=storage,
                checkpoint_config=train.CheckpointConfig(num_to_keep=2, checkpoint_score_attribute="loss",
                                                         checkpoint_score_order="min"),
                failure_config=train.FailureConfig(max_failures=3),
            ),
        )
        os.environ["MASTER_PORT"] = str(free_port())
        with environment(TRAINYARD_RUN_DIR=run, TRAINYARD_RUN_NAME="exp", TRAINYARD_STORAGE_PATH=storage), \
                contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            trainer.fit()
        # As Ray's restore: the run's own configuration, the loop found by its name.
        restored = TorchTrainer.restore(run)
        self.assertIs(restored.train_loop_per_worker, restorable_loop)
        self.assertEqual(restored.train_loop_config, {"lr": 0.1, "layers": [2, 3]})
        rc = restored.run_config
        self.assertEqual((rc.name, rc.storage_path), ("exp", storage))
        self.assertEqual(rc.checkpoint_config, trainer.run_config.checkpoint_config)
        self.assertEqual(rc.failure_config.max_failures, 3)
        self.assertEqual(restored.scaling_config, trainer.scaling_config)
        with environment(TRAINYARD_BINARY="/bin/trainyard"):
            argv = _driver.command(restored, storage, "exp")
        self.assertEqual(argv[argv.index("--max-restarts") + 1], "3")
        self.assertEqual(argv[argv.index("--keep-checkpoints") + 1], "2")
        self.assertEqual(argv[argv.index("--checkpoint-score") + 1:argv.index("--checkpoint-score") + 4],
                         ["loss", "--score-order", "min"])

    def test_datasets_refused(self) -> None:
        from ray.train.torch import TorchTrainer

        with self.assertRaisesRegex(ValueError, "Ray Data"):
            TorchTrainer(lambda: None, datasets={"train": object()})

    def test_gang_disagreements_are_said(self) -> None:
        from ray.train.torch import TorchTrainer

        trainer = TorchTrainer(
            lambda: None,
            scaling_config=train.ScalingConfig(num_workers=4, use_gpu=True),
            run_config=train.RunConfig(name="other", failure_config=train.FailureConfig(max_failures=3),
                                       checkpoint_config=train.CheckpointConfig(num_to_keep=2)),
        )
        err = io.StringIO()
        with environment(RANK="0", WORLD_SIZE="2", CUDA_VISIBLE_DEVICES="", TRAINYARD_RUN_NAME="mnist",
                         TRAINYARD_MAX_RESTARTS="0", TRAINYARD_KEEP_CHECKPOINTS="0"), contextlib.redirect_stderr(err):
            trainer._warn_disagreements()
        text = err.getvalue()
        for want in ("num_workers=4) differs from this gang of 2", "the gang wins", "--gpus-per-worker",
                     "RunConfig(name='other')", "max_failures=3",
                     "CheckpointConfig(num_to_keep=2) differs from this run's --keep-checkpoints (all); the run's "
                     "wins (start it with trainyard run --keep-checkpoints 2 to match)"):
            self.assertIn(want, text)
        err = io.StringIO()
        with environment(RANK="0", WORLD_SIZE="2", TRAINYARD_KEEP_CHECKPOINTS="2"), contextlib.redirect_stderr(err):
            trainer._warn_disagreements()
        self.assertNotIn("num_to_keep", err.getvalue())

    def test_ignored_options_are_named(self) -> None:
        from ray.train.torch import TorchTrainer

        trainer = TorchTrainer(
            lambda: None,
            scaling_config=train.ScalingConfig(num_workers=2, placement_strategy="SPREAD"),
            run_config=train.RunConfig(
                verbose=0,
                checkpoint_config=train.CheckpointConfig(num_to_keep=2, checkpoint_frequency=5),
                failure_config=train.FailureConfig(max_failures=1, fail_fast=True),
            ),
        )
        err = io.StringIO()
        with environment(RANK="0"), contextlib.redirect_stderr(err):
            trainer._warn_ignored()
        text = err.getvalue()
        for want in ("only mean something on a Ray cluster", "ScalingConfig(placement_strategy='SPREAD')",
                     "RunConfig(verbose=0)", "CheckpointConfig(checkpoint_frequency=5)", "FailureConfig(fail_fast=True)"):
            self.assertIn(want, text)
        for honoured in ("num_workers", "num_to_keep", "max_failures"):
            self.assertNotIn(honoured, text)
        quiet = io.StringIO()
        with environment(RANK="0"), contextlib.redirect_stderr(quiet):
            TorchTrainer(lambda: None, scaling_config=train.ScalingConfig(num_workers=2))._warn_ignored()
        self.assertEqual(quiet.getvalue(), "")


if __name__ == "__main__":
    unittest.main()

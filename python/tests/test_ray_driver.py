"""Driver mode of the ray compatibility package: when fit() launches a gang, and how."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile
import types
import unittest

from tests.support import environment

_COMPAT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "compat")
if _COMPAT not in sys.path:
    sys.path.append(_COMPAT)

from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig  # noqa: E402
from ray.train import _byvalue, _driver, _worker  # noqa: E402


def top_level_loop(config):
    return config


def _trainer(loop, config, run_config=None):
    """A TorchTrainer with the loop and its config (and the RunConfig)."""
    from ray.train.torch import TorchTrainer

    return TorchTrainer(loop, train_loop_config=config, scaling_config=ScalingConfig(num_workers=2),
                        run_config=run_config)


class DriverTest(unittest.TestCase):
    def test_only_an_implicit_process_asking_for_more_is_a_driver(self) -> None:
        two, one, gpu = ScalingConfig(num_workers=2), ScalingConfig(), ScalingConfig(use_gpu=True)
        with environment(TRAINYARD_GANG="implicit", TRAINYARD_BINARY="/bin/trainyard"):
            self.assertTrue(_driver.is_driver(two))
            self.assertTrue(_driver.is_driver(gpu))
            self.assertFalse(_driver.is_driver(one))
        with environment(TRAINYARD_GANG="explicit", TRAINYARD_BINARY="/bin/trainyard"):
            self.assertFalse(_driver.is_driver(two))
        with environment(TRAINYARD_GANG="implicit"):
            self.assertFalse(_driver.is_driver(two))

    def test_any_loop_ray_accepts_is_sent_and_what_cannot_be_pickled_is_named(self) -> None:
        import threading

        def inner(config):
            return config["x"] + 1

        for loop in (top_level_loop, lambda config: config, inner):
            parts = _byvalue.loads(_driver.payload(_trainer(loop, {"x": 1})))
            self.assertEqual(parts["train_loop_config"], {"x": 1})
            self.assertEqual(parts["train_loop_per_worker"]({"x": 1}), loop({"x": 1}))
        lock = threading.Lock()

        def uses_a_lock(config):
            return lock

        with self.assertRaisesRegex(TypeError, r"cannot send the training loop to the workers: the variable 'lock' "
                                               r"that .*uses_a_lock\(\) closes over \(a _thread.lock\) cannot be "
                                               r"pickled .*Create such an object inside train_loop_per_worker"):
            _driver.payload(_trainer(uses_a_lock, {}))
        with self.assertRaisesRegex(TypeError, r"train_loop_config\['lock'\] \(a _thread.lock\)"):
            _driver.payload(_trainer(top_level_loop, {"lock": lock}))
        # RunConfig's callbacks and stop mean nothing to the workers: not sent.
        rc = RunConfig(name="x", callbacks=[lock])
        sent = _byvalue.loads(_driver.payload(_trainer(top_level_loop, None, rc)))["run_config"]
        self.assertEqual((sent.name, sent.callbacks), ("x", None))

    def test_command_follows_the_configs(self) -> None:
        trainer = types.SimpleNamespace(
            scaling_config=ScalingConfig(num_workers=3, resources_per_worker={"GPU": 2}),
            run_config=RunConfig(
                failure_config=FailureConfig(max_failures=-1),
                checkpoint_config=CheckpointConfig(num_to_keep=2, checkpoint_score_attribute="loss",
                                                   checkpoint_score_order="min"),
            ),
        )
        with environment(TRAINYARD_BINARY="/bin/trainyard"):
            argv = _driver.command(trainer, "/runs", "exp")
        self.assertEqual(argv, [
            "/bin/trainyard", "run", "--workers", "3", "--storage-path", "/runs", "--name", "exp", "--resume-if-any",
            "--gpus-per-worker", "2", "--procs-per-worker", "1",
            "--max-restarts", str(_driver.UNLIMITED_RESTARTS), "--keep-checkpoints", "2",
            "--checkpoint-score", "loss", "--score-order", "min",
        ])
        trainer.scaling_config = ScalingConfig(num_workers=(2, 4))  # elastic, as Ray Train V2's
        with environment(TRAINYARD_BINARY="/bin/trainyard"):
            self.assertEqual(_driver.command(trainer, "/runs", "exp")[2:4], ["--workers", "2:4"])
        self.assertEqual(ScalingConfig(num_workers=[2, 4]).num_workers, (2, 4))  # as restore reads it
        for bad in ((4, 2), (0, 2), (1, 2, 3), 2.5):
            with self.assertRaisesRegex(ValueError, "min <= max"):
                ScalingConfig(num_workers=bad)
        trainer.scaling_config = ScalingConfig(num_workers=2, resources_per_worker={"GPU": 0.5})
        with environment(TRAINYARD_BINARY="/bin/trainyard"), self.assertRaisesRegex(ValueError, "whole GPUs"):
            _driver.command(trainer, "/runs", "exp")

    def test_command_counts_cpu_and_memory(self) -> None:
        """resources_per_worker's CPU and memory: leased on a server, checked here (as Ray
        would leave a gang that fits no node pending, and there is no node to wait for)."""
        trainer = types.SimpleNamespace(run_config=RunConfig(), scaling_config=ScalingConfig(
            num_workers=2, resources_per_worker={"CPU": 8, "memory": 2**30, "TPU": 1}))
        err = io.StringIO()
        with environment(TRAINYARD_BINARY="/bin/trainyard", TRAINYARD_GPU_LEASE_SOCKET="/state/lease.sock"), \
                contextlib.redirect_stderr(err):
            argv = _driver.command(trainer, "/runs", "exp")
        self.assertEqual(argv[9:], ["--cpus-per-worker", "8000m", "--memory-per-worker", str(2**30)])
        self.assertIn("'TPU' ignored: Trainyard counts CPU, GPU, memory only", err.getvalue())
        err = io.StringIO()
        trainer.scaling_config = ScalingConfig(num_workers=2, resources_per_worker={"CPU": 10**6, "memory": 1.5})
        with environment(TRAINYARD_BINARY="/bin/trainyard"), contextlib.redirect_stderr(err):
            argv = _driver.command(trainer, "/runs", "exp")
        self.assertEqual(argv[9:], ["--memory-per-worker", "1"])
        self.assertRegex(err.getvalue(), r"resources_per_worker=\{'CPU': 1000000\}\) asks for 2000000 CPUs for 2 "
                                         r"worker\(s\); this machine has \d+\. Ray would wait for a node that has them; "
                                         r"Trainyard runs the gang on what this machine has")
        trainer.scaling_config = ScalingConfig(num_workers=2, resources_per_worker={"CPU": 0.5})
        with environment(TRAINYARD_BINARY="/bin/trainyard"):
            self.assertEqual(_driver.command(trainer, "/runs", "exp")[9:], ["--cpus-per-worker", "500m"])
        trainer.scaling_config = ScalingConfig(num_workers=2, resources_per_worker={"CPU": 0, "memory": 0})
        with environment(TRAINYARD_BINARY="/bin/trainyard", TRAINYARD_GPU_LEASE_SOCKET="/s"):
            self.assertEqual(_driver.command(trainer, "/runs", "exp")[9:], [])  # trainyard run refuses 0
        for bad in (-1, "4", True):
            trainer.scaling_config = ScalingConfig(num_workers=2, resources_per_worker={"CPU": bad})
            with environment(TRAINYARD_BINARY="/bin/trainyard"), self.assertRaisesRegex(ValueError, "CPU must be a number of 0 or more"):
                _driver.command(trainer, "/runs", "exp")

    def test_default_run_is_named_after_the_driver(self) -> None:
        with environment(TRAINYARD_RUN_NAME="a" * 45, TRAINYARD_STORAGE_PATH="/runs"):
            storage, name = _driver._run_place(RunConfig())
        self.assertEqual((storage, name), ("/runs", "a" * 39 + "-train"))

    def test_storage_uri(self) -> None:
        """s3:// goes to the gang's trainyard run as it is, and the gang's folder here is its
        staging folder; other schemes are refused at fit(), never taken for a folder."""
        storage, name = _driver._run_place(RunConfig(storage_path="S3://my-bucket/experiments/", name="exp"))
        self.assertEqual((storage, name), ("s3://my-bucket/experiments/", "exp"))
        with environment(TRAINYARD_STAGING_DIR="/stage"):
            self.assertEqual(_driver.local_run_dir(storage, name), "/stage/s3/my-bucket/experiments/exp")
        for uri in ("gs://b/p", "hdfs://nn/p"):
            with self.assertRaisesRegex(ValueError, "is not supported: give s3://bucket/prefix"):
                _driver._run_place(RunConfig(storage_path=uri))

    def test_default_run_name_of_any_submission_id(self) -> None:
        """Ray's default submission IDs (capitals, '_') give a valid name of their own."""
        valid = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
        names = {}
        for driver in ("raysubmit_fPOmfwdHK5QGnJKC", "raysubmit_fpomfwdhk5qgnjkc", "rayjob-x-123",
                       "9lives", "__", "Ünïcode_id", "x" * 60, "a_" * 30):
            name = _driver.default_name(driver)
            self.assertRegex(name, valid, driver)
            self.assertLessEqual(len(name), _driver.MAX_NAME, driver)
            self.assertTrue(name.endswith("-train"), name)
            names[driver] = name
        self.assertEqual(names["rayjob-x-123"], "rayjob-x-123-train")  # a valid name is kept
        self.assertRegex(names["raysubmit_fPOmfwdHK5QGnJKC"], r"^raysubmit-fpomfwdhk5qgnjkc-[0-9a-f]{6}-train$")
        self.assertEqual(len(set(names.values())), len(names), names)  # never shared

    def test_worker_loads_the_loop_with_the_drivers_folders_last_on_its_path(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            spec = self._spec(folder)
            saved = list(sys.argv), list(sys.path)
            try:
                parts = _worker.load(spec)
                path, argv = list(sys.path), list(sys.argv)
            finally:
                sys.argv[:], sys.path[:] = saved
            self.assertEqual(argv, ["train.py", "--x"])
            self.assertEqual(path[-1], folder)  # after this package and the installed ones
            self.assertLess(path.index(_COMPAT), path.index(folder))
            self.assertEqual(parts["train_loop_per_worker"]({"x": 2}), 3)

    def test_worker_refuses_another_python_or_spec_format(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            spec = dict(self._spec(folder), python="cpython-10", executable="/opt/py/bin/python3")
            with self.assertRaisesRegex(RuntimeError, r"the driver runs Python cpython-10 \(/opt/py/bin/python3\).*"
                                                      "start the script with the Python its workers run"):
                _worker.load(spec)
            with self.assertRaisesRegex(RuntimeError, "format 1.*the same Trainyard"):
                _worker.load(dict(spec, version=1))

    @staticmethod
    def _spec(folder: str) -> dict:
        """A spec as the driver writes it, of a loop that is not importable (a lambda)."""
        return {
            "version": _driver.SPEC_VERSION, "python": _byvalue.python_tag(), "executable": sys.executable,
            "payload": _driver.payload(_trainer(lambda config: config["x"] + 1, {"x": 2})),
            "path": [folder], "argv": ["train.py", "--x"], "result_file": os.path.join(folder, "r.pkl"),
        }

    def test_worker_boot_ignores_a_ray_in_the_working_folder(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            os.mkdir(os.path.join(folder, "ray"))
            marker = os.path.join(folder, "planted-ray-ran")
            with open(os.path.join(folder, "ray", "__init__.py"), "w") as f:
                f.write(f"open({marker!r}, 'w').close()\n")
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(_COMPAT), _COMPAT]))
            env.pop("PYTHONSAFEPATH", None)
            done = subprocess.run([sys.executable, "-c", _driver.WORKER_BOOT], cwd=folder, env=env,
                                  capture_output=True, text=True, timeout=60, check=False)
            self.assertFalse(os.path.exists(marker), "the worker imported the ray/ in its working folder")
            self.assertEqual(done.returncode, 2, done.stderr)  # Trainyard's worker: no spec given
            self.assertIn("usage: python -m ray.train._worker", done.stderr)

    def test_worker_unpickles_only_a_private_spec_of_its_user(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            marker = os.path.join(folder, "planted-spec-ran")
            spec = os.path.join(folder, "gang.pkl")
            with open(spec, "wb") as f:  # unpickling it would create the marker
                f.write(b"cos\nsystem\n(S'touch " + marker.encode() + b"'\ntR.")
            os.chmod(spec, 0o666)
            with self.assertRaisesRegex(RuntimeError, "not a private file of yours"):
                _worker.main([spec])
            link = os.path.join(folder, "link.pkl")
            os.symlink(spec, link)
            with self.assertRaises(OSError):  # ELOOP: never through a link
                _worker.main([link])
            self.assertFalse(os.path.exists(marker), "the worker unpickled a spec others could write")


if __name__ == "__main__":
    unittest.main()


def _loop(config):  # a top-level loop, as restore needs
    return config


class RestoreTest(unittest.TestCase):
    def test_restore_continues_the_run_in_its_folder(self) -> None:
        from ray.train.torch import TorchTrainer

        with tempfile.TemporaryDirectory() as storage:
            run = os.path.join(storage, "exp")
            self.assertFalse(TorchTrainer.can_restore(run))
            with self.assertRaisesRegex(ValueError, "no run there"):
                TorchTrainer.restore(run, train_loop_per_worker=_loop)
            os.makedirs(run)
            with open(os.path.join(run, "run.json"), "w", encoding="utf-8") as f:
                f.write('{"name": "exp", "attempts": [{"ranks": [{}, {}, {}]}]}')
            self.assertTrue(TorchTrainer.can_restore(run))
            with self.assertRaisesRegex(ValueError, "train_loop_per_worker"):
                TorchTrainer.restore(run)
            trainer = TorchTrainer.restore(run, train_loop_per_worker=_loop, train_loop_config={"lr": 1})
            self.assertEqual((trainer.run_config.storage_path, trainer.run_config.name), (storage, "exp"))
            self.assertEqual(trainer.scaling_config.num_workers, 3)
            self.assertEqual(trainer.train_loop_config, {"lr": 1})
            two = TorchTrainer.restore(run, train_loop_per_worker=_loop, scaling_config=ScalingConfig(num_workers=2))
            self.assertEqual(two.scaling_config.num_workers, 2)

    def test_restore_takes_the_saved_configs_and_the_callers_overrides(self) -> None:
        import contextlib
        import io
        import json

        from ray.train import _restore
        from ray.train.torch import TorchConfig, TorchTrainer

        trainer = types.SimpleNamespace(
            train_loop_per_worker=_loop, train_loop_config={"lr": 1}, metadata={"k": "v"},
            scaling_config=ScalingConfig(num_workers=3), torch_config=TorchConfig(backend="gloo", timeout_s=60),
            run_config=RunConfig(checkpoint_config=CheckpointConfig(num_to_keep=2),
                                 failure_config=FailureConfig(max_failures=-1)),
            resume_from_checkpoint=None,
        )
        with tempfile.TemporaryDirectory() as storage:
            run = os.path.join(storage, "exp")
            os.makedirs(run)
            with open(os.path.join(run, "run.json"), "w", encoding="utf-8") as f:
                f.write('{"name": "exp", "attempts": [{"ranks": [{}]}]}')
            _restore.save(trainer, run)
            got = TorchTrainer.restore(run)
            self.assertIs(got.train_loop_per_worker, _loop)
            self.assertEqual((got.train_loop_config, got.metadata), ({"lr": 1}, {"k": "v"}))
            self.assertEqual(got.scaling_config.num_workers, 3)  # saved, not the last attempt's 1
            self.assertEqual(got.torch_config, TorchConfig(backend="gloo", timeout_s=60))
            self.assertEqual(got.run_config.checkpoint_config.num_to_keep, 2)
            self.assertEqual(got.run_config.failure_config.max_failures, -1)
            # The caller may give the loop's config and the scaling again; not the RunConfig.
            err = io.StringIO()
            with environment(), contextlib.redirect_stderr(err):
                over = TorchTrainer.restore(run, train_loop_config={"lr": 2}, scaling_config=ScalingConfig(num_workers=2),
                                            run_config=RunConfig(checkpoint_config=CheckpointConfig(num_to_keep=9)))
            self.assertEqual((over.train_loop_config, over.scaling_config.num_workers), ({"lr": 2}, 2))
            self.assertEqual(over.run_config.checkpoint_config.num_to_keep, 2)
            self.assertIn("restore(run_config=...) is ignored", err.getvalue())
            # A loop config JSON cannot hold is not saved: restore asks for it.
            trainer.train_loop_config = {"when": object()}
            _restore.save(trainer, run)
            with self.assertRaisesRegex(ValueError, "train_loop_config was not saved"):
                TorchTrainer.restore(run)
            self.assertEqual(TorchTrainer.restore(run, train_loop_config={"x": 1}).train_loop_config, {"x": 1})
            with open(os.path.join(run, _restore.FILE), encoding="utf-8") as f:
                self.assertEqual(json.load(f)["loop"], {"module": __name__, "qualname": "_loop"})


class Unpicklable(Exception):
    def __init__(self, a, b):  # pickle calls Unpicklable(message) again: a TypeError
        super().__init__(f"{a} {b}")


def _fail_in_loop(config):
    raise ValueError(f"injected failure at epoch {config['epoch']}")


class FailureTest(unittest.TestCase):
    """A failed gang's workers hand their exceptions to the driver's TrainingFailedError."""

    def setUp(self) -> None:
        self.run_dir = tempfile.mkdtemp(prefix="ty-ray-run-")
        self.driver = tempfile.mkdtemp(prefix="ty-ray-driver-")
        self.folder = os.path.join(self.driver, "ray-driver")
        os.mkdir(self.folder, 0o700)
        self.fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        self.addCleanup(os.close, self.fd)
        for d in (self.run_dir, self.driver):
            self.addCleanup(__import__("shutil").rmtree, d, True)
        with open(os.path.join(self.run_dir, "run.json"), "w", encoding="utf-8") as f:
            f.write('{"attempts": [{}, {}]}')  # two attempts: the last is 2

    def _fail(self, rank: int, attempt: int, exc_from) -> None:
        with environment(**{_worker.RESULT_ENV: os.path.join(self.folder, "gang.result.pkl"),
                            "RANK": str(rank), "WORLD_SIZE": "4", "TRAINYARD_ATTEMPT": str(attempt)}):
            try:
                exc_from()
            except Exception as e:  # noqa: BLE001
                _worker.write_error(e)

    def test_the_failed_workers_exceptions_and_tracebacks(self) -> None:
        from ray.train import TrainingFailedError

        def unpicklable():
            raise Unpicklable("no", "pickle")

        self._fail(0, 1, lambda: _fail_in_loop({"epoch": 0}))  # attempt 1, restarted since
        self._fail(3, 2, unpicklable)
        self._fail(1, 2, lambda: _fail_in_loop({"epoch": 2}))
        err = _driver.failure("gang", self.run_dir, 1, self.fd)
        self.assertIsInstance(err, TrainingFailedError)
        text = str(err)
        self.assertTrue(text.startswith(
            "Training failed due to worker errors:\n"
            "Terminating training worker group after encountering failure(s) on 2 worker(s):\n"
            "[Rank 1]\nTraceback (most recent call last):\n"), text)
        self.assertIn(f'{__file__}", line', text)
        self.assertIn("in _fail_in_loop\n    raise ValueError(", text)
        self.assertIn("ValueError: injected failure at epoch 2\n[Rank 3]\nTraceback", text)
        self.assertIn("Unpicklable: no pickle\n(the training gang: run 'gang', folder " + self.run_dir, text)
        self.assertNotIn("epoch 0", text)  # attempt 1's error is not the run's
        self.assertEqual(sorted(err.worker_failures), [1, 3])
        self.assertIsInstance(err.worker_failures[1], ValueError)
        self.assertEqual(str(err.worker_failures[1]), "injected failure at epoch 2")
        self.assertEqual(str(err.worker_failures[3]), f"{__name__}.Unpicklable: no pickle")
        # A new fit() of the run starts without the old errors.
        _driver._remove_errors("gang", self.fd)
        self.assertEqual(os.listdir(self.folder), [])

    def test_a_gang_that_failed_without_an_exception_says_its_exit_code(self) -> None:
        err = _driver.failure("gang", self.run_dir, 137, self.fd)
        self.assertIn("exit code 137", str(err))
        self.assertIn("without a Python exception", str(err))
        self.assertEqual(err.worker_failures, {})

    def test_error_files_are_written_only_for_a_driver(self) -> None:
        with environment(RANK="0"):
            _worker.write_error(ValueError("nobody asked"))  # no driver: nothing to write
        self.assertEqual(os.listdir(self.folder), [])

"""init_process_group, get_device, prepare_model and prepare_data_loader, with torch."""

from __future__ import annotations

import collections
import contextlib
import datetime
import io
import json
import subprocess
import sys
import unittest
from typing import Any
from unittest import mock

import trainyard
import trainyard._dist
from tests.support import HAVE_TORCH, clean_env, environment, free_port, reset_trainyard

_INIT_ONE = r"""
import json, torch, torch.distributed as dist, trainyard
trainyard.init_process_group()
trainyard.init_process_group()  # idempotent
t = torch.ones(1)
dist.all_reduce(t)
pg = dist.distributed_c10d._get_default_group()
timeout = getattr(getattr(pg, "options", None), "_timeout", None)
print(json.dumps({"backend": dist.get_backend(), "world_size": dist.get_world_size(),
                  "sum": t.item(),
                  "timeout": None if timeout is None else timeout.total_seconds()}))
dist.destroy_process_group()
"""

_WORKER = r"""
import json, torch, torch.distributed as dist, trainyard
from torch.utils.data import DataLoader, TensorDataset
trainyard.init_process_group()
model = trainyard.prepare_model(torch.nn.Linear(1, 1))
loader = trainyard.prepare_data_loader(
    DataLoader(TensorDataset(torch.arange(10.0)), batch_size=2, shuffle=True))
epochs = []
for epoch in range(2):
    seen = []
    for (x,) in loader:
        seen += [int(v) for v in x.tolist()]
        model(x.unsqueeze(1)).sum().backward()  # DDP all-reduces the gradients
    epochs.append(seen)
print(json.dumps({"rank": dist.get_rank(), "model": type(model).__name__,
                  "len": len(loader), "epochs": epochs}))
dist.destroy_process_group()
"""


def _run_ranks(script: str, world_size: int, **env: str) -> list[dict[str, Any]]:
    """Run ``script`` as ranks 0..world_size-1 of one CPU job; return their JSON outputs."""
    port = str(free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            env=clean_env(
                RANK=str(rank),
                LOCAL_RANK=str(rank),
                WORLD_SIZE=str(world_size),
                LOCAL_WORLD_SIZE=str(world_size),
                GROUP_RANK="0",
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=port,
                CUDA_VISIBLE_DEVICES="",
                **env,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(world_size)
    ]
    outputs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=180)
            if proc.returncode != 0:
                raise AssertionError(f"rank exited {proc.returncode}:\n{err}")
            outputs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return outputs


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class InitProcessGroupTest(unittest.TestCase):
    def setUp(self) -> None:
        reset_trainyard()

    def test_world_of_one_with_gloo(self) -> None:
        [out] = _run_ranks(_INIT_ONE, 1, TRAINYARD_PG_TIMEOUT_SECONDS="42")
        self.assertEqual(out["backend"], "gloo")
        self.assertEqual(out["world_size"], 1)
        self.assertEqual(out["sum"], 1.0)
        if out["timeout"] is not None:  # readable in torch 1.13; not in every version
            self.assertEqual(out["timeout"], 42.0)

    def test_no_world_size_does_nothing(self) -> None:
        import torch.distributed as dist

        with environment(), mock.patch("torch.distributed.init_process_group") as init:
            trainyard.init_process_group()
        init.assert_not_called()
        self.assertFalse(dist.is_initialized())

    def _init(self, cuda: bool, **env: str) -> tuple[mock.Mock, mock.Mock]:
        """Call init_process_group with torch's side mocked; return (init, set_device)."""
        with environment(RANK="3", LOCAL_RANK="1", WORLD_SIZE="4", **env), mock.patch(
            "torch.distributed.is_initialized", return_value=False
        ), mock.patch("torch.distributed.init_process_group") as init, mock.patch(
            "torch.cuda.is_available", return_value=cuda
        ), mock.patch(
            "torch.cuda.device_count", return_value=2
        ), mock.patch(
            "torch.cuda.set_device"
        ) as set_device:
            trainyard.init_process_group()
        return init, set_device

    def test_arguments_without_cuda(self) -> None:
        init, set_device = self._init(cuda=False, TRAINYARD_PG_TIMEOUT_SECONDS="42")
        init.assert_called_once_with(
            backend="gloo",
            init_method="env://",
            rank=3,
            world_size=4,
            timeout=datetime.timedelta(seconds=42),
        )
        set_device.assert_not_called()

    def test_arguments_with_cuda(self) -> None:
        init, set_device = self._init(cuda=True)
        self.assertEqual(init.call_args.kwargs["backend"], "nccl")
        self.assertEqual(init.call_args.kwargs["timeout"], datetime.timedelta(seconds=300))
        set_device.assert_called_once_with(1)

    def test_explicit_arguments_win(self) -> None:
        with environment(WORLD_SIZE="1", TRAINYARD_PG_TIMEOUT_SECONDS="42"), mock.patch(
            "torch.distributed.is_initialized", return_value=False
        ), mock.patch("torch.distributed.init_process_group") as init:
            trainyard.init_process_group("gloo", datetime.timedelta(seconds=5))
        self.assertEqual(init.call_args.kwargs["backend"], "gloo")
        self.assertEqual(init.call_args.kwargs["timeout"], datetime.timedelta(seconds=5))

    def test_bad_timeout(self) -> None:
        for value in ("soon", "0", "-1", "inf"):
            with self.subTest(value=value), self.assertRaisesRegex(
                ValueError, "TRAINYARD_PG_TIMEOUT_SECONDS"
            ):
                self._init(cuda=False, TRAINYARD_PG_TIMEOUT_SECONDS=value)


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class TwoRanksTest(unittest.TestCase):
    def test_ddp_and_sharded_data(self) -> None:
        outputs = _run_ranks(_WORKER, 2, TRAINYARD_PG_TIMEOUT_SECONDS="60")
        self.assertEqual([o["rank"] for o in outputs], [0, 1])
        for out in outputs:
            self.assertEqual(out["model"], "DistributedDataParallel")
            self.assertEqual(out["len"], 3)  # 5 items in batches of 2
        for epoch in range(2):
            seen = [out["epochs"][epoch] for out in outputs]
            self.assertEqual([len(s) for s in seen], [5, 5])
            self.assertEqual(set(seen[0]) & set(seen[1]), set())
            self.assertEqual(sorted(seen[0] + seen[1]), list(range(10)))
        # set_epoch gives each epoch its own shuffle.
        self.assertNotEqual(
            outputs[0]["epochs"][0] + outputs[1]["epochs"][0],
            outputs[0]["epochs"][1] + outputs[1]["epochs"][1],
        )


class ToDeviceTest(unittest.TestCase):
    """Batches keep their shape while their tensors move (a stand-in tensor type here)."""

    def test_nested_batch(self) -> None:
        class Tensor:
            def __init__(self, value: int) -> None:
                self.value = value

            def to(self, device: str, non_blocking: bool) -> tuple[str, int, str, bool]:
                return ("moved", self.value, device, non_blocking)

        Pair = collections.namedtuple("Pair", "x y")
        batch = {"a": Tensor(1), "b": [Tensor(2), (Tensor(3), "label")], "p": Pair(Tensor(4), 5)}
        moved = trainyard._dist._to_device(batch, "dev", True, Tensor)
        self.assertEqual(
            moved,
            {
                "a": ("moved", 1, "dev", True),
                "b": [("moved", 2, "dev", True), (("moved", 3, "dev", True), "label")],
                "p": Pair(("moved", 4, "dev", True), 5),
            },
        )
        self.assertIsInstance(moved["p"], Pair)
        self.assertIsInstance(moved["b"], list)


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class PrepareTest(unittest.TestCase):
    def setUp(self) -> None:
        reset_trainyard()

    def test_get_device(self) -> None:
        import torch

        with environment():
            device = trainyard.get_device()
        self.assertEqual(device.type, "cuda" if torch.cuda.is_available() else "cpu")
        with environment(), mock.patch("torch.cuda.is_available", return_value=False):
            self.assertEqual(trainyard.get_device(), torch.device("cpu"))
        with environment(LOCAL_RANK="3"), mock.patch(
            "torch.cuda.is_available", return_value=True
        ), mock.patch("torch.cuda.device_count", return_value=4):
            self.assertEqual(trainyard.get_device(), torch.device("cuda", 3))
        with environment(LOCAL_RANK="3"), mock.patch(
            "torch.cuda.is_available", return_value=True
        ), mock.patch("torch.cuda.device_count", return_value=1):
            self.assertEqual(trainyard.get_device(), torch.device("cuda", 0))
        # The launcher says which of the gang's GPUs is this process's own (two per worker).
        with environment(LOCAL_RANK="1", TRAINYARD_CUDA_DEVICE="2"), mock.patch(
            "torch.cuda.is_available", return_value=True
        ), mock.patch("torch.cuda.device_count", return_value=4):
            self.assertEqual(trainyard.get_device(), torch.device("cuda", 2))

    def test_model_in_world_of_one(self) -> None:
        import torch

        with environment():
            model = trainyard.prepare_model(torch.nn.Linear(2, 1))
            device = trainyard.get_device()
        self.assertIsInstance(model, torch.nn.Linear)
        self.assertEqual(next(model.parameters()).device.type, device.type)

    def test_loader_in_world_of_one(self) -> None:
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        original = DataLoader(TensorDataset(torch.arange(6.0), torch.arange(6)), batch_size=4)
        with environment():
            loader = trainyard.prepare_data_loader(original)
        self.assertIs(loader.loader, original)
        self.assertIs(trainyard.prepare_data_loader(loader), loader)
        self.assertEqual(len(loader), 2)
        self.assertEqual(loader.batch_size, 4)
        batches = list(loader)
        self.assertEqual([len(x) for x, _ in batches], [4, 2])
        self.assertEqual(batches[0][1].device.type, trainyard.get_device().type)

    def test_loader_sharded_and_epochs(self) -> None:
        import torch
        from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

        original = DataLoader(
            TensorDataset(torch.arange(10)),
            batch_size=2,
            shuffle=True,
            drop_last=True,
            collate_fn=None,
            pin_memory=False,
        )
        with environment(RANK="0", WORLD_SIZE="2"):
            loader = trainyard.prepare_data_loader(original)
        self.assertIsInstance(loader.sampler, DistributedSampler)
        self.assertEqual((loader.sampler.num_replicas, loader.sampler.rank), (2, 0))
        self.assertTrue(loader.sampler.shuffle)
        self.assertTrue(loader.drop_last)
        self.assertEqual(len(loader), 2)  # 5 items, batches of 2, drop_last

        def epoch() -> list[int]:
            return [int(v) for (x,) in loader for v in x]

        first, second = epoch(), epoch()
        self.assertEqual(loader.sampler.epoch, 1)
        self.assertNotEqual(first, second)
        loader.set_epoch(0)
        self.assertEqual(epoch(), first)  # the same epoch, the same order
        self.assertEqual(loader.sampler.epoch, 0)

    def test_sequential_loader_is_not_shuffled(self) -> None:
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        with environment(RANK="1", WORLD_SIZE="2"):
            loader = trainyard.prepare_data_loader(
                DataLoader(TensorDataset(torch.arange(10)), batch_size=10)
            )
        self.assertFalse(loader.sampler.shuffle)
        self.assertEqual([x.tolist() for (x,) in loader], [[1, 3, 5, 7, 9]])

    def test_loaders_kept_as_they_are(self) -> None:
        import torch
        from torch.utils.data import (
            BatchSampler,
            DataLoader,
            IterableDataset,
            SequentialSampler,
            TensorDataset,
        )

        class Stream(IterableDataset):
            def __iter__(self):  # type: ignore[no-untyped-def]
                return iter(range(4))

        dataset = TensorDataset(torch.arange(4))
        stream = DataLoader(Stream(), batch_size=2)
        batched = DataLoader(
            dataset, batch_sampler=BatchSampler(SequentialSampler(dataset), 2, False)
        )
        stderr = io.StringIO()
        with environment(RANK="0", WORLD_SIZE="2"), contextlib.redirect_stderr(stderr):
            self.assertIs(trainyard.prepare_data_loader(stream).loader, stream)
            self.assertIs(trainyard.prepare_data_loader(batched).loader, batched)
        self.assertIn("custom batch_sampler", stderr.getvalue())


if __name__ == "__main__":
    unittest.main()

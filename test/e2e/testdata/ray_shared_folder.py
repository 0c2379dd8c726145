"""A Ray Train driver in a shared working folder (test/e2e/ray_planted_test.go).

Run as ``python3 train.py GO``: once started it prints DRIVER started and waits for the
file GO before fit() launches the gang, so that the test can create packages in the
working folder after the driver started, as another user of a shared folder would. Its
loop imports sibling.py, a module beside the script, in each worker.
"""

import os
import sys
import time

import ray.train
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer


def train_loop_per_worker(config):
    import sibling  # beside the script, as a Ray Train script's helpers are

    import trainyard

    ctx = ray.train.get_context()
    print(f"WORKER rank={ctx.get_world_rank()} sibling={sibling.VALUE} ray={ray.__file__} "
          f"trainyard={trainyard.__file__}", flush=True)
    ray.train.report({"sibling": sibling.VALUE})


if __name__ == "__main__":
    print(f"DRIVER started pid={os.getpid()}", flush=True)
    deadline = time.monotonic() + 120
    while not os.path.exists(sys.argv[1]):
        if time.monotonic() > deadline:
            sys.exit("no go file")
        time.sleep(0.05)
    result = TorchTrainer(train_loop_per_worker, scaling_config=ScalingConfig(num_workers=2),
                          run_config=RunConfig(name="gang")).fit()
    print(f"DRIVER RESULT metrics={result.metrics}", flush=True)

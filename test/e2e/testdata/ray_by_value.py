"""A Ray Train driver with no main guard whose loops are what Ray's cloudpickle sends.

Its first fit() uses a global open file, which cannot be pickled: fit() refuses it, naming
the global. Its second fit() runs a lambda that closes over a local variable and calls a
function of the script that calls itself. The top level prints TOP once, as in Ray.
"""

import os

import ray.train
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer

print(f"TOP pid={os.getpid()}", flush=True)
log = open(__file__, encoding="utf-8")


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def reads_the_log(config):
    print(log.readline())


try:
    TorchTrainer(reads_the_log, scaling_config=ScalingConfig(num_workers=2)).fit()
except TypeError as e:
    print(f"REFUSED {e}", flush=True)

offset = 100


def make_loop():
    label = "lambda"
    return lambda config: print(
        f"LOOP {label} rank={ray.train.get_context().get_world_rank()} fib={fib(config['n']) + offset}",
        flush=True)


result = TorchTrainer(make_loop(), train_loop_config={"n": 10}, scaling_config=ScalingConfig(num_workers=2),
                      run_config=RunConfig(name="gang")).fit()
print(f"AFTER FIT path={result.path}", flush=True)

"""The by-value pickler a driver's fit() sends its training loop with (ray.train._byvalue).

Each case pickles in one Python process (a script, its loop in ``__main__``) and loads in
another that never saw the script, as a gang's worker does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import unittest

_COMPAT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "compat")
if _COMPAT not in sys.path:
    sys.path.append(_COMPAT)

from ray.train import _byvalue  # noqa: E402
from tests.support import PACKAGE_PARENT  # noqa: E402

#: A script in Ray's quickstart style: no main guard, its loop calls what the script defines.
SCRIPT = '''
import dataclasses, enum, functools, sys, typing, xml.dom.minidom
from ray.train import _byvalue
import sibling

print("TOP LEVEL RAN", flush=True)
SCALE = 3

class Base:
    def __init__(self, x):
        self.x = x

class Net(Base):
    k = 2
    def __init__(self, x):
        super().__init__(x)          # the __class__ cell: a cycle through the class
    def forward(self):
        return helper(self.x) * self.k
    @staticmethod
    def name():
        return "net"
    @classmethod
    def kind(cls):
        return cls.__name__
    @property
    def plus_one(self):
        return self.x + 1

class Color(enum.Enum):
    RED = 1
    BLUE = 2
    def lower(self):
        return self.name.lower()

@dataclasses.dataclass
class Config:
    a: int = 1
    b: list = dataclasses.field(default_factory=list)

T = typing.TypeVar("T")

class Box(typing.Generic[T]):         # a generic class: its bases as written, its TypeVar
    def __init__(self, v: T):
        self.v = v

class Slotted:
    __slots__ = ("v",)
    def __init__(self):
        self.v = 5

def helper(v):
    return v * SCALE

def even(n):                          # two functions that call each other
    return True if n == 0 else odd(n - 1)

def odd(n):
    return False if n == 0 else even(n - 1)

def fact(n, *, base=1):               # a function that calls itself, with a kw default
    return base if n <= 1 else n * fact(n - 1, base=base)

def counter():
    def count(n):                     # a nested function whose closure holds itself
        return 0 if n == 0 else 1 + count(n - 1)
    return count

def plus(k):
    def add(x):
        return x + k
    return add

def traced(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args) + 100
    return wrapper

@traced
def decorated(x):
    return x

@functools.lru_cache(maxsize=8)
def cached(n):
    return n * 10

COUNT = counter()
ADD2 = plus(2)

def train_loop_per_worker(config):
    return {
        "net": Net(config["x"]).forward(), "static": Net.name(), "cls": Net.kind(), "prop": Net(1).plus_one,
        "enum": (Color.BLUE.lower(), Color(1) is Color.RED), "dataclass": (Config() == Config(), Config(2, [1]) == Config(2, [1])),
        "slots": Slotted().v, "generic": Box[int](3).v, "mutual": even(10), "recursive": fact(5), "closure": (COUNT(4), ADD2(1)),
        "decorated": decorated(1), "cached": (cached(3), cached.cache_info().maxsize), "lambda": config["fn"](1), "submodule": xml.dom.minidom.parseString("<a/>").documentElement.tagName,
        "sibling": sibling.VALUE, "module": __name__, "same_globals": even.__globals__ is odd.__globals__,
    }

with open(sys.argv[1], "wb") as f:
    f.write(_byvalue.dumps({"loop": train_loop_per_worker, "config": {"x": 2, "fn": lambda y: y + SCALE}}))
'''

#: What a worker runs: load the payload and call the loop (the script's folder appended last).
WORKER = '''
import json, sys
sys.path.append(sys.argv[2])
from ray.train import _byvalue
with open(sys.argv[1], "rb") as f:
    payload = _byvalue.loads(f.read())
out = payload["loop"](payload["config"])
# The script's classes go into this __main__ (as a gang worker does), so pickle finds them.
import pickle
from ray.train._worker import share_main
share_main(payload["loop"])
out["pickled_here"] = pickle.loads(pickle.dumps(payload["loop"].__globals__["Net"](4))).forward()
print(json.dumps(out, sort_keys=True))
'''

WANT = {
    "net": 12, "static": "net", "cls": "Net", "prop": 2, "enum": ["blue", True], "dataclass": [True, True],
    "slots": 5, "generic": 3, "mutual": True, "cached": [30, 8], "recursive": 120, "closure": [4, 3], "decorated": 101, "lambda": 4,
    "submodule": "a", "sibling": 7, "module": "__main__", "same_globals": True, "pickled_here": 24,
}


def _python(code_or_file: list[str], cwd: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PACKAGE_PARENT, _COMPAT]))
    return subprocess.run([sys.executable, *code_or_file], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60, check=False)


class ByValueTest(unittest.TestCase):
    def test_a_loop_runs_in_a_process_that_never_saw_the_script(self) -> None:
        import json

        with tempfile.TemporaryDirectory() as folder:
            script, payload = os.path.join(folder, "train.py"), os.path.join(folder, "loop.pkl")
            with open(script, "w") as f:
                f.write(SCRIPT)
            with open(os.path.join(folder, "sibling.py"), "w") as f:
                f.write("VALUE = 7\n")
            driver = _python([script, payload], folder)
            self.assertEqual(driver.returncode, 0, driver.stderr)
            self.assertEqual(driver.stdout.count("TOP LEVEL RAN"), 1)
            with tempfile.TemporaryDirectory() as elsewhere:  # not the script's folder
                worker = _python(["-c", WORKER, payload, folder], elsewhere)
            self.assertEqual(worker.returncode, 0, worker.stderr)
            self.assertNotIn("TOP LEVEL RAN", worker.stdout, "the worker ran the script's top level")
            self.assertEqual(json.loads(worker.stdout), WANT)

    def test_what_cannot_be_pickled_is_named(self) -> None:
        lock = threading.Lock()

        def loop(config):
            return helper(config)

        def helper(config):
            return lock

        with self.assertRaisesRegex(_byvalue.NotSendable, "cannot pickle '_thread.lock' object"):
            _byvalue.dumps(loop)
        where = _byvalue.find_unsendable({"train_loop_per_worker": loop}, "spec")
        self.assertRegex(where, r"^the variable 'lock' that .*helper\(\) closes over \(a _thread.lock\) "
                                r"cannot be pickled \(TypeError: cannot pickle '_thread.lock' object\)$")
        with open(os.devnull, "rb") as f:
            where = _byvalue.find_unsendable({"files": [1, f]}, "train_loop_config")
        self.assertRegex(where, r"^train_loop_config\['files'\]\[1\] \(a _io.BufferedReader\) cannot be pickled")
        self.assertIsNone(_byvalue.find_unsendable({"a": [1, 2]}, "train_loop_config"))

    def test_a_generator_global_is_named(self) -> None:
        namespace: dict[str, object] = {"__name__": "__main__"}
        exec("rows = (i for i in range(3))\ndef loop(config):\n    return list(rows)\n", namespace)  # noqa: S102
        where = _byvalue.find_unsendable(namespace["loop"], "train_loop_per_worker")
        self.assertRegex(where, r"^the global 'rows' that loop\(\) uses \(a builtins.generator\)")

    def test_only_the_globals_the_code_uses_go(self) -> None:
        namespace: dict[str, object] = {"__name__": "__main__", "train": threading.Lock(), "SCALE": 2}
        exec("def loop(model):\n    model.train()\n    return [SCALE for _ in range(1)]\n", namespace)  # noqa: S102
        self.assertEqual(_byvalue.referenced_globals(namespace["loop"]), {"SCALE": 2})  # not train
        self.assertEqual(_byvalue.loads(_byvalue.dumps(namespace["loop"]))(types_namespace()), [2])

    def test_an_object_pickled_by_its_name_in_the_script_is_refused(self) -> None:
        namespace: dict[str, object] = {"__name__": "__main__"}
        exec("class Token:\n    def __reduce__(self):\n        return 'TOKEN'\nTOKEN = Token()\n"  # noqa: S102
             "def loop(config):\n    return TOKEN\n", namespace)
        with self.assertRaisesRegex(_byvalue.NotSendable, r"Token 'TOKEN' pickles as a name of the script "
                                                          r"\(__main__.TOKEN\), and the workers do not run"):
            _byvalue.dumps(namespace["loop"])

    def test_modules_and_importable_functions_go_by_reference(self) -> None:
        import json
        import os.path as osp

        data = _byvalue.dumps([json, osp.join, json.JSONDecoder])
        self.assertNotIn(b"_load_code", data)
        self.assertLess(len(data), 200)  # names, no code
        self.assertEqual(_byvalue.loads(data), [json, osp.join, json.JSONDecoder])

    def test_another_python_is_refused_with_what_to_do(self) -> None:
        data = _byvalue.dumps(lambda: 1)
        tag = _byvalue.python_tag().encode()
        with self.assertRaisesRegex(_byvalue.WrongPython, r"with Python cpython-10.*run the workers with the driver's Python"):
            _byvalue.loads(data.replace(tag, b"cpython-10", 1))

    def test_a_module_not_importable_by_name_is_refused(self) -> None:
        import types

        fake = types.ModuleType("not_in_sys_modules")
        with self.assertRaisesRegex(_byvalue.NotSendable, "'not_in_sys_modules' cannot be imported by name"):
            _byvalue.dumps(fake)


def types_namespace():
    """An object with a train() method."""
    import types

    return types.SimpleNamespace(train=lambda: None)


if __name__ == "__main__":
    unittest.main()

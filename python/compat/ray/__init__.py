"""ray: Trainyard's stand-in for the parts of Ray that Ray Train scripts use.

Trainyard puts this package on a worker's PYTHONPATH when the worker's Python cannot
import a real ``ray``, or when it cannot tell which Python the job runs (a shell command
line such as ``cd src && python train.py``, a wrapper script). A real Ray is never
shadowed: importing this package first looks for a real ``ray`` where the job's Python
installs packages (its site-packages, the user's, the folders of PYTHONPATH) and, when
there is one, ``import ray`` gives that one (see ``_real``). TRAINYARD_RAY=trainyard
makes it give this one anyway. It needs only the standard
library; torch is imported when a function that needs it is called.

It covers ``ray.init``, ``ray.shutdown``, ``ray.is_initialized``,
``ray.cluster_resources`` and ``ray.available_resources`` here, and Ray Train in
:mod:`ray.train` and :mod:`ray.train.torch`. There is no Ray cluster: ``init`` starts
nothing, and the resources are this machine's.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import _real

if _real.defer(__name__, __file__):
    # A real Ray was imported in this package's place (sys.modules["ray"]): nothing of
    # this package is defined, and `import ray` gives the real one.
    pass
else:
    from ._api import *  # noqa: F401,F403  pylint: disable=wildcard-import,unused-wildcard-import
    from ._api import __all__, __version__  # noqa: F401


def __getattr__(name: str) -> Any:
    """Import ``ray.train`` on first use of ``ray.train``, as Ray's lazy imports do."""
    if name == "train":
        return importlib.import_module(".train", __name__)
    raise AttributeError(f"module 'ray' has no attribute {name!r} (Trainyard's ray covers ray.train only)")

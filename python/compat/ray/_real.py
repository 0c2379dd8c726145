"""Defer to a real Ray: when the job's Python has one, ``import ray`` gives it, not Trainyard's.

Trainyard offers its ``ray`` on PYTHONPATH even where it cannot ask the job's Python
whether it has a real one (a shell command line, a wrapper script, a virtualenv the
command activates), and PYTHONPATH comes before site-packages. So this package's
``__init__`` first looks for a real ``ray`` where a Python installs packages: the folders
of PYTHONPATH other than Trainyard's own, the interpreter's site-packages and the user's.
Never in the working folder or the script's, where someone else may have planted a
``ray/``: a Python that imports from there finds that one before this package anyway.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import site
import sys

#: Set to "trainyard" to use Trainyard's ray even where a real Ray is installed.
CHOICE_ENV = "TRAINYARD_RAY"


def places(own: str) -> list[str]:
    """Return the folders where a real Ray would be installed: PYTHONPATH's (not own, the
    folder holding Trainyard's ray), site-packages, the user's site-packages."""
    own = os.path.realpath(own)
    found = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
             if p and os.path.isabs(p) and os.path.realpath(p) != own]
    try:
        found += site.getsitepackages()
    except AttributeError:  # an old virtualenv's site module
        pass
    if site.ENABLE_USER_SITE:
        found.append(site.getusersitepackages())
    return list(dict.fromkeys(found))


def defer(name: str, init_file: str) -> bool:
    """Import a real Ray as the module ``name`` in place of this package, if there is one
    and TRAINYARD_RAY does not say otherwise; return whether it did."""
    if os.environ.get(CHOICE_ENV) == "trainyard":
        return False
    own = os.path.dirname(os.path.dirname(os.path.abspath(init_file)))
    spec = importlib.machinery.PathFinder.find_spec(name, places(own))
    if spec is None or spec.loader is None or spec.origin in (None, "namespace"):
        return False  # none, or a folder without __init__.py
    ours = sys.modules[name]
    real = importlib.util.module_from_spec(spec)
    sys.modules[name] = real
    try:
        spec.loader.exec_module(real)
    except BaseException:
        sys.modules[name] = ours
        raise
    sys.modules.pop(name + "._real", None)
    return True

"""The API of Trainyard's ray package (see ``ray``): what ``ray/__init__`` exports when no real Ray
is installed."""

from __future__ import annotations

import threading
from typing import Any

from ._resources import node_resources

__all__ = ["__version__", "RayContext", "init", "shutdown", "is_initialized", "cluster_resources", "available_resources"]

#: The Ray API this package follows (Ray 2.x, Train V2 where V1 and V2 differ). The
#: "+trainyard" local version tells it apart from a real Ray.
__version__ = "2.40.0+trainyard"

_lock = threading.Lock()
_initialized = False


class RayContext(dict):
    """What :func:`init` returns: a dict of the (local, never started) cluster's addresses."""

    @property
    def address_info(self) -> dict[str, Any]:
        """The same dict, as Ray's ``RayContext.address_info``."""
        return dict(self)

    @property
    def dashboard_url(self) -> str | None:
        """None: there is no Ray dashboard."""
        return None

    def disconnect(self) -> None:
        """Same as :func:`shutdown`."""
        shutdown()

    def __enter__(self) -> RayContext:
        return self

    def __exit__(self, *exc: object) -> None:
        shutdown()


def init(address: str | None = None, *, ignore_reinit_error: bool = False, **kwargs: Any) -> RayContext:
    """Mark Ray as initialised; start nothing (there is no Ray cluster under Trainyard).

    Every argument Ray's ``init`` takes is accepted (``address``, ``num_cpus``,
    ``runtime_env``, ``namespace``, ...) and ignored, since Trainyard already placed this
    process. As in Ray, a second call raises RuntimeError unless ``ignore_reinit_error``.
    """
    global _initialized
    with _lock:
        if _initialized and not ignore_reinit_error:
            raise RuntimeError(
                "Maybe you called ray.init twice by accident? This error can be suppressed "
                "by passing in 'ignore_reinit_error=True' or by calling 'ray.shutdown()' "
                "prior to 'ray.init()'."
            )
        _initialized = True
    node = next(k for k in node_resources() if k.startswith("node:") and k != "node:__internal_head__")
    return RayContext(node_ip_address=node[len("node:"):], address=address or "local", webui_url=None)


def shutdown() -> None:
    """Mark Ray as not initialised. Safe to call when it is not."""
    global _initialized
    with _lock:
        _initialized = False


def is_initialized() -> bool:
    """Return whether :func:`init` was called (and :func:`shutdown` not since)."""
    with _lock:
        return _initialized


def cluster_resources() -> dict[str, float]:
    """Return this machine's resources with Ray's key names.

    ``CPU`` (the cores this process may run on), ``GPU`` (the devices in
    CUDA_VISIBLE_DEVICES when it is set, else the count ``nvidia-smi -L`` prints, else 0),
    ``memory`` (bytes, MemTotal of /proc/meminfo), ``node:<ip>`` and
    ``node:__internal_head__`` (1.0 each). Unlike Ray, it does not call ``init`` for you.
    """
    return node_resources()


def available_resources() -> dict[str, float]:
    """Return the same as :func:`cluster_resources`: nothing else runs on this Ray."""
    return node_resources()

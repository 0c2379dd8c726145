"""What a gang's workers ask for beyond GPUs: ``ScalingConfig.resources_per_worker``'s CPU
and memory, checked against this machine and turned into ``trainyard run`` flags.

Ray (2.40) gives each worker ``{"CPU": 1}`` unless ``resources_per_worker`` says otherwise,
and leaves a worker that no node can hold pending (with a warning) until one joins the
cluster. Trainyard has no cluster to wait for:

- Inside a job of ``trainyard server`` the gang's CPU and memory go to the server with its
  GPUs (``--cpus-per-worker`` and ``--memory-per-worker`` of the nested run, leased from
  the server's scheduler): a gang that does not fit now waits and says why, one that can
  never fit is refused and fit() fails with the server's reason.
- Elsewhere (``trainyard run`` on the user's own machine) a gang that asks for more than the
  machine has runs anyway on the cores and memory there are, and fit() says so: waiting
  would wait forever.

Keys other than CPU, GPU and memory (Ray's custom resources) are ignored, with a word.
"""

from __future__ import annotations

import os
from typing import Any

#: The environment variable that marks a process of a trainyard server's job (it can lease).
LEASE_SOCKET_ENV = "TRAINYARD_GPU_LEASE_SOCKET"

#: The keys of resources_per_worker that Trainyard counts.
COUNTED = ("CPU", "GPU", "memory")


def flags(scaling: Any, warn: Any) -> list[str]:
    """Return the ``trainyard run`` flags for the workers' CPU and memory, calling warn
    with what Trainyard does differently from Ray."""
    per = dict(scaling.resources_per_worker or {})
    workers = scaling.max_workers
    other = sorted(k for k in per if k not in COUNTED)
    if other:
        warn(f"ScalingConfig(resources_per_worker=...): {', '.join(map(repr, other))} ignored: "
             f"Trainyard counts {', '.join(COUNTED)} only")
    out: list[str] = []
    leased = bool(os.environ.get(LEASE_SOCKET_ENV))
    cpu = _amount(per, "CPU")
    if cpu:  # 0 CPU (Ray reserves none) keeps Trainyard's default: 1 per worker
        if leased or _fits(cpu * workers, _cores(), "CPUs", cpu, "CPU", workers, warn):
            out += ["--cpus-per-worker", f"{int(round(cpu * 1000))}m"]
    memory = _amount(per, "memory")
    if memory:
        if leased or _fits(memory * workers, _memory(), "bytes of memory", memory, "memory", workers, warn):
            out += ["--memory-per-worker", str(int(memory))]
    return out


def _amount(per: dict, key: str) -> float | None:
    """Return resources_per_worker[key] as a number of 0 or more, None when absent."""
    if key not in per:
        return None
    value = per[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(
            f"ScalingConfig(resources_per_worker={{{key!r}: {value!r}}}): {key} must be a number of 0 or more"
        )
    return float(value)


def _fits(need: float, have: float | None, unit: str, each: float, key: str, workers: int, warn: Any) -> bool:
    """Return whether need fits in have; warn when it does not."""
    if have is None or need <= have:
        return True
    warn(f"ScalingConfig(resources_per_worker={{{key!r}: {_num(each)}}}) asks for {_num(need)} {unit} "
         f"for {workers} worker(s); this machine has {_num(have)}. Ray would wait for a node that has "
         f"them; Trainyard runs the gang on what this machine has")
    return False


def _num(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:g}"


def _cores() -> float | None:
    """Return the cores this process may run on, as trainyard run counts them."""
    try:
        return float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        count = os.cpu_count()
        return float(count) if count else None


def _memory() -> float | None:
    """Return this machine's memory in bytes, None when unknown."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None

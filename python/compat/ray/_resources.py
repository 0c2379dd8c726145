"""This machine's resources, as Ray names them."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess

__all__ = ["node_resources", "gpu_count", "node_ip"]


def node_resources() -> dict[str, float]:
    """Return {"CPU", "GPU", "memory", "node:<ip>", "node:__internal_head__"} for this machine."""
    return {
        "CPU": float(cpu_count()),
        "GPU": float(gpu_count()),
        "memory": float(memory_bytes()),
        f"node:{node_ip()}": 1.0,
        "node:__internal_head__": 1.0,
    }


def cpu_count() -> int:
    """Return the number of cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def gpu_count() -> int:
    """Return the GPUs this process sees: CUDA_VISIBLE_DEVICES when set, else ``nvidia-smi -L``."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        devices = [d for d in visible.split(",") if d.strip()]
        if len(devices) == 1 and devices[0].strip().lower() in ("void", "none", "nodevfiles", "-1"):
            return 0
        return len(devices)
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def memory_bytes() -> int:
    """Return MemTotal of /proc/meminfo in bytes, or 0 when it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def node_ip() -> str:
    """Return this machine's address as Ray finds it (the route to a public address), or 127.0.0.1.

    Connecting a UDP socket sends nothing; it only asks the kernel for the source address.
    """
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("8.8.8.8", 80))
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"

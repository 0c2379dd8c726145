"""What Ray Train prints while it trains: its "Training config" and "Training result" tables.

Ray's logs show, for each report, a line and a table (Ray's tune/experimental/output.py,
``AIR_TABULATE_TABLEFMT``: tabulate with rounded corners, keys left, values right)::

    Training finished iteration 1 at 2024-11-21 19:15:46. Total running time: 4min 22s
    ╭───────────────────────────────╮
    │ Training result               │
    ├───────────────────────────────┤
    │ checkpoint_dir_name           │
    │ time_this_iter_s        144.9 │
    │ time_total_s            144.9 │
    │ training_iteration          1 │
    │ accuracy                0.805 │
    │ loss                  0.52336 │
    ╰───────────────────────────────╯

Users read these, and some tools parse them, so they are printed the same way, by rank 0
of the gang on its standard output: Ray's automatic keys first, then the reported metrics,
each group sorted; floats with five decimals and trailing zeros cut; nested dicts as
``key/sub`` rows. Ray prints them from its driver; here rank 0 does, which in a Ray job's
log is the same place.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
from typing import Any, Iterator

#: The keys Ray adds to every result, shown first (Ray's AUTO_RESULT_KEYS that Train shows).
AUTO_KEYS = ("checkpoint_dir_name", "time_this_iter_s", "time_total_s", "training_iteration")

#: The keys Ray never shows in a result table (its BLACKLISTED_KEYS).
HIDDEN_KEYS = frozenset({
    "config", "date", "done", "hostname", "iterations_since_restore", "node_ip", "pid",
    "time_since_restore", "timestamp", "trial_id", "experiment_tag", "should_checkpoint",
})


def _cell(key: str, value: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """Yield the rows of one key as Ray renders them (its _render_table_item)."""
    key = prefix + key
    if isinstance(value, float):
        yield key, f"{value:.5f}".rstrip("0")
    elif isinstance(value, dict):
        yield key, ""
        for sub, sv in value.items():
            yield from _cell(str(sub), sv, prefix=key + "/")
    elif value is None:
        yield key, ""
    else:
        yield key, str(value)


def table(header: str, rows: list[tuple[str, str]]) -> str:
    """Return rows as Ray's rounded table under header: keys left, values right."""
    left = max([len(header) + 2] + [len(k) for k, _ in rows])
    right = max([2] + [len(v) for _, v in rows])
    rule = "─" * (left + 2) + "─" + "─" * (right + 2)
    lines = ["╭" + rule + "╮", f"│ {header.ljust(left)}   {''.rjust(right)} │", "├" + rule + "┤"]
    lines += [f"│ {k.ljust(left)}   {v.rjust(right)} │" for k, v in rows]
    lines.append("╰" + rule + "╯")
    return "\n".join(lines)


def result_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """Return a result's rows: Ray's automatic keys, then the metrics, each sorted."""
    upper: list[tuple[str, str]] = []
    lower: list[tuple[str, str]] = []
    for key, value in sorted(result.items(), key=lambda kv: str(kv[0])):
        if key in HIDDEN_KEYS:
            continue
        (upper if key in AUTO_KEYS else lower).extend(_cell(str(key), value))
    return upper + lower


def running_time(seconds: float) -> str:
    """Return a duration as Ray writes it: 7s, 4min 22s, 1hr 0min 5s, 2d 3hr 0min 1s."""
    rest = int(round(seconds))
    days, rest = divmod(rest, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    out = ""
    if days:
        out += f"{days}d "
    if hours or out:
        out += f"{hours}hr "
    if minutes or out:
        out += f"{minutes}min "
    return out + f"{secs}s"


def _now() -> str:
    return f"{datetime.datetime.now():%Y-%m-%d %H:%M:%S}"


class Printer:
    """Rank 0's view of a fit(): prints Ray's lines and tables as the loop reports."""

    def __init__(self, enabled: bool, out: Any = None) -> None:
        self.enabled = enabled
        self.out = out
        self.start = time.monotonic()
        self.last = self.start
        self.iterations = 0

    def _print(self, text: str) -> None:
        if self.enabled:
            print(text, file=self.out or sys.stdout, flush=True)

    def _total(self) -> str:
        return running_time(time.monotonic() - self.start)

    def started(self, config: dict[str, Any] | None) -> None:
        """Print the loop's configuration, as Ray does when training starts."""
        if not config:
            self._print("Training started without custom configuration.")
            return
        rows = [r for k, v in sorted(config.items(), key=lambda kv: str(kv[0]))
                for r in _cell(str(k), v, prefix="train_loop_config/")]
        self._print("Training started with configuration:\n" + table("Training config", rows))

    def reported(self, iteration: int, metrics: dict[str, Any], checkpoint: str | None,
                 checkpoint_path: str | None) -> dict[str, Any]:
        """Print one report's table; return Ray's automatic keys for it."""
        now = time.monotonic()
        auto = {
            "checkpoint_dir_name": checkpoint,
            "time_this_iter_s": now - self.last,
            "time_total_s": now - self.start,
            "training_iteration": iteration,
        }
        self.last, self.iterations = now, iteration
        shown = {**{k: v for k, v in metrics.items() if k not in AUTO_KEYS}, **auto}
        self._print(f"Training finished iteration {iteration} at {_now()}. Total running time: {self._total()}\n"
                    + table("Training result", result_rows(shown)))
        if checkpoint_path:
            self._print(f"Training saved a checkpoint for iteration {iteration} at: {_where(checkpoint_path)}")
        return auto

    def completed(self) -> None:
        """Print the line Ray prints when training ends."""
        self._print(f"Training completed after {self.iterations} iterations at {_now()}. "
                    f"Total running time: {self._total()}")


def _where(checkpoint_path: str) -> str:
    """Where a checkpoint is kept, as Ray writes it: ``(local)/path``, or for a run kept in a
    bucket ``(s3)bucket/prefix/run/checkpoint_NNNNNN`` (the folder here is its staging copy)."""
    storage = os.environ.get("TRAINYARD_STORAGE_PATH") or ""
    if storage.lower().startswith("s3://"):
        run = os.path.basename(os.path.dirname(checkpoint_path))
        return "(s3)" + "/".join([storage[5:].strip("/"), run, os.path.basename(checkpoint_path)])
    return f"(local){checkpoint_path}"

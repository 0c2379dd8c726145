"""Soak worker for bench/soak: many reports, then output without newlines.

Run by bench/soak under ``trainyard run`` (one rank). Standard library only. It does, with
a rest of ``--settle`` seconds before and after each phase so that the launcher's memory
can be read while idle:

1. ``--reports`` calls of ``trainyard.report()`` with three metrics;
2. ``--bytes`` of output without a newline: the first half a progress bar redrawn with
   ``\\r`` (about 100 bytes an update, as tqdm draws them), the second half one line with
   no separator at all; then a newline.

It appends ``<phase> <unix time>`` lines to ``--phases``: ``ready``, ``reports-begin``,
``reports-end``, ``output-begin``, ``output-end``, ``done``.
"""

import argparse
import sys
import time

import trainyard

BLOCK = 1 << 20  # bytes written at a time


def parse_args():
    """Parse the command-line flags."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reports", type=int, default=1_000_000, help="report() calls")
    p.add_argument("--bytes", type=int, default=1 << 30, help="bytes of output without newlines")
    p.add_argument("--settle", type=float, default=2.0, help="seconds of rest around each phase")
    p.add_argument("--phases", required=True, help="file to append phase marks to")
    return p.parse_args()


def mark(path, phase):
    """Append a phase mark with the time."""
    with open(path, "a") as f:
        f.write(f"{phase} {time.time():.6f}\n")


def progress_block():
    """About BLOCK bytes of progress-bar updates, each starting with a carriage return."""
    parts, size, i = [], 0, 0
    while size < BLOCK:
        done = i % 10001
        bar = "#" * (done * 20 // 10000)
        s = f"\r{done * 100 // 10000:3d}%|{bar:<20}| {done}/10000 [00:{i % 60:02d}<00:42, 123.45it/s]"
        parts.append(s)
        size += len(s)
        i += 1
    return "".join(parts).encode()


def write_output(total):
    """Write total bytes: half progress updates, half one line without separators."""
    out = sys.stdout.buffer
    half = total // 2
    block = progress_block()
    left = half
    while left > 0:
        out.write(block[:left])
        left -= min(left, len(block))
    line = b"0123456789abcdef" * (BLOCK // 16)
    left = total - half
    while left > 0:
        out.write(line[:left])
        left -= min(left, len(line))
    out.write(b"\n")
    out.flush()


def main():
    args = parse_args()
    mark(args.phases, "ready")
    time.sleep(args.settle)
    mark(args.phases, "reports-begin")
    for i in range(args.reports):
        trainyard.report({"loss": 1.0 / (i + 1), "step": i, "lr": 0.1})
    mark(args.phases, "reports-end")
    time.sleep(args.settle)
    mark(args.phases, "output-begin")
    write_output(args.bytes)
    mark(args.phases, "output-end")
    time.sleep(args.settle)
    print("soak worker done", flush=True)
    mark(args.phases, "done")


if __name__ == "__main__":
    main()

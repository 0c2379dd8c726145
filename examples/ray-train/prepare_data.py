"""Place Debian's Fashion-MNIST where torchvision looks, so that no download happens.

torchvision's ``datasets.FashionMNIST(root, download=True)`` downloads nothing when the four
uncompressed files are already in ``<root>/FashionMNIST/raw/``. This writes them there from
Debian's package ``dataset-fashion-mnist`` (``/usr/share/datasets/fashion-mnist``), optionally
keeping only the first N training and M test samples (a quick run: the idx headers say the
smaller counts).

    python3 prepare_data.py                      # ~/data, the whole data set
    python3 prepare_data.py --root /tmp/d --train 2000 --test 500
    python3 prepare_data.py --source /my/fashion-mnist   # the .gz files from elsewhere
"""

import argparse
import gzip
import os
import struct
import sys

SOURCE = "/usr/share/datasets/fashion-mnist"
FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def copy_idx(source, name, root, limit):
    """Decompress one idx file into root/FashionMNIST/raw, keeping its first limit items."""
    src = os.path.join(source, name + ".gz")
    if not os.path.exists(src):
        sys.exit(f"{src} is missing: install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist), "
                 f"or give --source a folder holding {name}.gz and the other Fashion-MNIST files")
    with gzip.open(src, "rb") as f:
        data = f.read()
    magic, count = struct.unpack(">II", data[:8])
    dims = (magic & 0xFF) - 1  # dimensions after the item count
    shape = struct.unpack(">" + "I" * dims, data[8:8 + 4 * dims])
    item = 1
    for d in shape:
        item *= d
    keep = count if limit <= 0 else min(limit, count)
    head = struct.pack(">II", magic, keep) + data[8:8 + 4 * dims]
    body = data[8 + 4 * dims:8 + 4 * dims + keep * item]
    out = os.path.join(root, "FashionMNIST", "raw", name)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "wb") as f:
        f.write(head + body)
    return keep


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default=os.path.expanduser("~/data"), help="torchvision's root (default ~/data)")
    p.add_argument("--train", type=int, default=0, help="keep the first N training samples (0: all)")
    p.add_argument("--test", type=int, default=0, help="keep the first N test samples (0: all)")
    p.add_argument("--source", default=SOURCE, help=f"the folder of the .gz files (default {SOURCE})")
    args = p.parse_args()
    for split, limit in (("train", args.train), ("test", args.test)):
        kept = [copy_idx(args.source, name, args.root, limit) for name in FILES[split]]
        print(f"{split}: {kept[0]} samples in {os.path.join(args.root, 'FashionMNIST', 'raw')}")


if __name__ == "__main__":
    main()

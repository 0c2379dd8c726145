"""Zip a folder as Ray's working_dir packager does: python3 package.py FOLDER OUT.zip.

A test fixture (upload's TestExtractRayPackages) that makes the zipfile calls of Ray's
``_zip_files`` (python/ray/_private/runtime_env/packaging.py, Ray 2.40 to master): every
path under the folder, the folder itself first, is handed to a handler that writes a
regular file, or a folder with nothing in it, with ``ZipFile.write(path, relative path)``
into a ``ZipFile(out, "w", strict_timestamps=False)``. So the folder itself is written, as
``./``, when it is empty; links are followed (``is_file``, ``is_dir`` and
``ZipFile.write`` stat through them). ``excludes`` and ``.gitignore`` only leave paths
out, so they are left out here. It prints the entries' names, one a line.
"""

import sys
from pathlib import Path
from zipfile import ZipFile


def paths(path: Path):
    """Yield path, then everything under it, as Ray's _dir_travel visits them."""
    yield path
    if path.is_dir():
        for sub in sorted(path.iterdir()):
            yield from paths(sub)


def main(folder: str, out: str) -> None:
    root = Path(folder).absolute()
    with ZipFile(Path(out).absolute(), "w", strict_timestamps=False) as zf:
        for path in paths(root):
            if path.is_dir() and next(path.iterdir(), None) is None or path.is_file():
                zf.write(path, path.relative_to(root))
        names = zf.namelist()
    print("\n".join(names))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""The run folder, checked before anything of it is handed out.

The launcher opens the run folder once, when the run starts, and reaches everything of it
through that opened folder. The folder's path, TRAINYARD_RUN_DIR, is what the training
script gets; if someone renamed the run folder away and put another in its place, the
path would lead there. So before this helper hands out a folder to write a checkpoint
into, or a checkpoint to resume from, it checks that the path still leads to the folder
the launcher opened (TRAINYARD_RUN_DIR_ID, its device and inode), and that what it hands
out is a real folder (not a symbolic link) of the user this process runs as.
"""

from __future__ import annotations

import os
import stat

__all__ = [
    "RunFolderError", "open_run_dir", "open_private", "check_run_dir", "check_own_folder", "open_own_file", "inside",
]

#: The variable that holds the run folder's "device:inode", set by the launcher.
ID_ENV = "TRAINYARD_RUN_DIR_ID"

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class RunFolderError(RuntimeError):
    """The run folder, or something in it, is not what the launcher left there."""


def _id(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}"


def _check_id(run_dir: str, st: os.stat_result) -> None:
    want = os.environ.get(ID_ENV)
    if want and _id(st) != want:
        raise RunFolderError(
            f"trainyard: run folder {run_dir} was replaced while the run ran (it is {_id(st)}, the launcher "
            f"opened {want}): refusing to use what is there now; someone with write access to the storage "
            "path moved it"
        )


def open_run_dir(run_dir: str) -> int:
    """Open the run folder (not through a link at its end) once it is checked; return its fd."""
    try:
        fd = os.open(run_dir, _DIR_FLAGS)
    except OSError as e:
        raise RunFolderError(f"trainyard: run folder {run_dir}: {e.strerror} (a symbolic link, or gone?)") from None
    try:
        _check_id(run_dir, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_run_dir(run_dir: str) -> None:
    """Check that the path run_dir still leads to the folder the launcher opened."""
    os.close(open_run_dir(run_dir))


def _check_owner(path: str, st: os.stat_result) -> None:
    if st.st_uid != os.geteuid():
        raise RunFolderError(
            f"trainyard: {path} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()}): "
            "refusing to use it (it may have been planted); remove it if you do not know where it came from"
        )


def open_private(parent_fd: int, name: str, path: str, mode: int = 0o777) -> int:
    """Make (when missing) and open the folder name in the open folder parent_fd.

    It must be a real folder of this user; path names it in errors. Return its fd.
    """
    try:
        os.mkdir(name, mode, dir_fd=parent_fd)
    except FileExistsError:
        pass
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as e:
        raise RunFolderError(f"trainyard: {path}: {e.strerror} (a symbolic link?)") from None
    try:
        _check_owner(path, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_own_folder(path: str) -> bool:
    """Return whether path is a folder; raise RunFolderError for a link or another user's."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise RunFolderError(f"trainyard: {path} is a symbolic link: refusing to use it")
    if not stat.S_ISDIR(st.st_mode):
        return False
    _check_owner(path, st)
    return True


def inside(path: str, folder: str) -> bool:
    """Return whether path lies in folder (by their absolute paths)."""
    path, folder = os.path.abspath(path), os.path.abspath(folder)
    return path.startswith(folder.rstrip(os.sep) + os.sep)


def open_own_file(path: str, dir_fd: int | None = None) -> int:
    """Open the regular file path (in dir_fd when given) for reading, refusing a symbolic
    link, another user's file, and one that others may write; return its fd."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        _check_owner(path, st)
        if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o022:
            raise RunFolderError(f"trainyard: {path} is not a private file of yours: refusing to read it")
    except BaseException:
        os.close(fd)
        raise
    return fd

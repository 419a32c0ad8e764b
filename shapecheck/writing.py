"""Writing a file the way the file system holds it, for ``--fix`` and ``--write-baseline``.

A write goes through symlinks to the file they name, keeps the file's owner, group and mode,
keeps hard links, never replaces anything but a regular file, and is never left half-done by
a crash: the new content is written beside the file and renamed over it. Where renaming would
lose what the file's inode carries (other hard links, an owner this user cannot give a new
file), the file is rewritten in place instead, as editors do (vim's ``backupcopy=auto``): a
rename would silently split the link or hand the file to someone else, which is worse than the
short window a crash could leave a partly written file.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile

CHANGED = "changed while shapecheck ran"


class WriteError(Exception):
    """A file that cannot, or must not, be written; it is left as it was."""


def writable_target(path: str) -> tuple[str, os.stat_result | None]:
    """The file a write to ``path`` lands in (every symlink resolved) and its status, or
    ``None`` when nothing is there yet. Anything but a regular file (a FIFO, a device, a
    directory) is refused: replacing it would destroy it, writing into it could block."""
    real = os.path.realpath(path)
    try:
        status = os.stat(real)
    except FileNotFoundError:
        return real, None
    except OSError as error:
        raise WriteError(f"cannot write: {error.strerror}") from error
    if not stat.S_ISREG(status.st_mode):
        raise WriteError("cannot write: not a regular file")
    return real, status


def write_file(path: str, data: bytes, *, expected: bytes | None = None) -> None:
    """Make ``data`` the content of the file at ``path``.

    With ``expected`` (the content that was read and fixed), the file must still hold exactly
    that, checked just before the write, or it is left alone: someone edited it meanwhile.
    Without, a missing file is created.
    """
    real, status = writable_target(path)
    if status is None and expected is not None:
        raise WriteError(CHANGED)
    if status is not None:
        mode = stat.S_IMODE(status.st_mode)
        if not mode & stat.S_IWUSR or not os.access(real, os.W_OK):
            raise WriteError("cannot write: the file is read-only")
    try:
        # a rename would split a hard link: the file's other names would keep the old content
        linked = status is not None and status.st_nlink > 1
        if linked or not _replace(real, data, status, expected):
            _rewrite_in_place(real, data, expected)
    except OSError as error:
        raise WriteError(f"cannot write: {error.strerror}") from error


def _replace(real: str, data: bytes, status: os.stat_result | None, expected: bytes | None) -> bool:
    """Write a temporary file beside ``real`` with its owner, group and mode, and rename it
    over ``real``. False, with nothing changed, where this user cannot give the new file the
    old one's owner and group."""
    handle, temporary = tempfile.mkstemp(
        dir=os.path.dirname(real), prefix=".shapecheck-", suffix=".tmp"
    )
    replaced = False
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        if status is None:
            os.chmod(temporary, 0o666 & ~_umask())  # what creating the file would have made
        elif not _keep_owner(temporary, status):
            return False
        else:
            os.chmod(temporary, stat.S_IMODE(status.st_mode))  # after chown, which clears setuid
        _check_unchanged(real, expected)
        os.replace(temporary, real)
        replaced = True
    finally:
        if not replaced:
            os.unlink(temporary)
    return True


def _keep_owner(path: str, status: os.stat_result) -> bool:
    """Give ``path`` the owner and group in ``status``; False where this user may not."""
    if sys.platform == "win32":  # no owners to keep
        return True
    try:
        os.chown(path, status.st_uid, status.st_gid)
    except PermissionError:
        return False
    return True


def _rewrite_in_place(real: str, data: bytes, expected: bytes | None) -> None:
    """Overwrite the file's own bytes, so its inode (every hard link, owner, mode) stays.
    The new content is written before the old is cut off: a crash never empties the file."""
    with open(real, "r+b") as file:
        if expected is not None and file.read() != expected:
            raise WriteError(CHANGED)
        file.seek(0)
        file.write(data)
        file.truncate()
        file.flush()
        os.fsync(file.fileno())


def _check_unchanged(real: str, expected: bytes | None) -> None:
    if expected is None:
        return
    try:
        with open(real, "rb") as file:
            unchanged = file.read() == expected
    except OSError:
        unchanged = False
    if not unchanged:
        raise WriteError(CHANGED)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask

"""Reading the files shapecheck is given (sources, configuration, baselines): regular files
only. A checkout can hold a FIFO, a device or a symlink to one under any name; reading one
would wait for a writer forever or never reach an end."""

from __future__ import annotations

import errno
import os
import stat

# Opening a FIFO for reading waits for a writer unless non-blocking; a terminal must not
# become our controlling one. Neither flag exists on Windows, which needs O_BINARY instead.
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_BINARY", 0)
)


def read_regular_file(path: str | os.PathLike[str]) -> bytes:
    """The content of ``path``; ``OSError`` when it cannot be opened or is not a regular
    file (its ``strerror`` says why, as for any other unreadable file)."""
    with open(os.open(path, _OPEN_FLAGS), "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        return file.read()

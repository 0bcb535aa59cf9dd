"""``LocalFileSystem``: ``fs/read_text_file`` and ``fs/write_text_file`` on the host's disk,
confined to the session's roots.

Rules (each refusal is a ``ServiceError`` with a clear message and a ``reason`` tag):

- Paths must be absolute strings without NUL bytes (``-32602``).
- The path is resolved (``..`` and every symlink, file or directory) and must land inside one of
  the session's roots (``session.roots``, resolved too) or the service's ``extra_roots``;
  ``/root2`` is not inside ``/root``. Anything under ``/proc``, ``/sys`` or ``/dev`` is refused
  whatever the roots (``-32602``).
- Only regular files are read or replaced: directories, FIFOs, sockets and devices are refused
  without being opened (``-32602``). A missing file is ``-32002`` (resource not found).
- The resolved path is then walked from its root one component at a time with ``O_NOFOLLOW``
  directory descriptors, and the file opened relative to its directory with ``O_NOFOLLOW``: a
  symlink swapped in after the check makes the request fail (``path_changed``) instead of
  escaping.
- Reads decode strict UTF-8: a file that is not UTF-8 is refused rather than returned with
  replacement characters, which an agent would then write back, corrupting the file. ``line``
  (1-based) and ``limit`` (a number of lines) select lines split on ``\\n`` (line endings are
  kept). At most ``max_read_bytes`` (64 MiB) are returned; a larger whole-file read is refused
  (ask for a ``line``/``limit`` window instead).
- Writes are atomic: a temporary file in the target's directory, written, ``fsync``-ed, then
  ``os.replace``-d over the target (and the directory ``fsync``-ed). A failure at any point
  leaves the original untouched and removes the temporary file. An existing file keeps its
  permission bits (and its owner when the host may set it); a new one gets ``0o666 & ~umask``.
  Writing through a symlink replaces the symlink's *target* (which must be inside the roots),
  not the link. Missing parent directories are created (``create_parents=True``, the default)
  only below the root, one component at a time; with ``create_parents=False`` they are refused.
- File I/O runs in a worker thread (``asyncio.to_thread``) so big files never block the loop.
  A cancelled request stops waiting at once; a write already under way still completes
  atomically or not at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import io
import os
import secrets
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from ._errors import (
    REASON_DISABLED,
    REASON_INVALID_PARAMS,
    REASON_IS_DIRECTORY,
    REASON_NOT_A_DIRECTORY,
    REASON_NOT_REGULAR_FILE,
    REASON_NOT_UTF8,
    REASON_PATH_CHANGED,
    REASON_PERMISSION_DENIED,
    REASON_TOO_LARGE,
    ServiceError,
    failed,
    not_found,
    refused,
)
from ._roots import SessionLike, check_absolute, confine, resolve_roots

DEFAULT_MAX_READ_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_WRITE_BYTES = 64 * 1024 * 1024
_LINE_CHUNK = 1024 * 1024

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_NOCTTY = getattr(os, "O_NOCTTY", 0)
_DIR_FLAGS = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC


@dataclass(frozen=True)
class _Target:
    path: str
    """As the agent sent it."""
    real: str
    """Fully resolved."""
    root: str
    """The (resolved) root it lies in."""
    parents: tuple[str, ...]
    """Directory components from ``root`` down to the file's directory."""
    name: str | None
    """The file's name in its directory (None: the path is the root itself)."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "not a regular file"


class LocalFileSystem:
    """Serves the agent's file requests from the local disk, inside the session's roots.

    ``read``/``write`` choose what is offered (advertised as ``fs.readTextFile`` /
    ``fs.writeTextFile``); ``extra_roots`` are directories allowed for every session in addition
    to ``session.roots``.
    """

    def __init__(
        self,
        *,
        read: bool = True,
        write: bool = True,
        extra_roots: Iterable[str | os.PathLike[str]] = (),
        max_read_bytes: int = DEFAULT_MAX_READ_BYTES,
        max_write_bytes: int = DEFAULT_MAX_WRITE_BYTES,
        create_parents: bool = True,
    ) -> None:
        self.can_read = read
        self.can_write = write
        self.extra_roots: tuple[str, ...] = tuple(os.fspath(r) for r in extra_roots)
        for root in self.extra_roots:
            if not os.path.isabs(root):
                raise ValueError(f"extra root {root!r} must be an absolute path")
        if max_read_bytes < 0 or max_write_bytes < 0:
            raise ValueError("byte limits must be >= 0")
        self.max_read_bytes = max_read_bytes
        self.max_write_bytes = max_write_bytes
        self.create_parents = create_parents

    # ------------------------------------------------------------------ confinement

    def roots(self, session: SessionLike) -> list[str]:
        """The resolved directories ``session`` may touch."""
        return resolve_roots([*session.roots, *self.extra_roots])

    def resolve(self, session: SessionLike, path: object) -> str:
        """The resolved path ``path`` would access, or the ``ServiceError`` refusing it."""
        return self._target(session, path).real

    def _target(self, session: SessionLike, path: object) -> _Target:
        return _target_in([*session.roots, *self.extra_roots], path)

    # ------------------------------------------------------------------ read

    async def read_text_file(
        self, session: SessionLike, path: str, line: int | None = None, limit: int | None = None
    ) -> str:
        if not self.can_read:
            raise refused("reading files is disabled on this host", REASON_DISABLED, path=path)
        if line is not None and (isinstance(line, bool) or not isinstance(line, int) or line < 1):
            raise refused(f'"line" must be an integer >= 1 (1-based), got {line!r}', REASON_INVALID_PARAMS)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise refused(f'"limit" must be an integer >= 0, got {limit!r}', REASON_INVALID_PARAMS)
        check_absolute(path)  # cheap refusals without a thread hop
        roots = [*session.roots, *self.extra_roots]
        return await asyncio.to_thread(self._read_text, roots, path, line, limit)

    def _read_text(self, roots: list[str], path: str, line: int | None, limit: int | None) -> str:
        target = _target_in(roots, path)
        data = self._read_bytes(target, line, limit)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            where = "the selected lines" if line is not None or limit is not None else "the file"
            raise refused(
                f"{target.path} is not UTF-8 text (invalid byte at offset {exc.start} of {where})",
                REASON_NOT_UTF8,
                path=target.path,
            ) from None

    def _read_bytes(self, target: _Target, line: int | None, limit: int | None) -> bytes:
        if target.name is None:
            raise refused(f"{target.path} is a directory, not a file", REASON_IS_DIRECTORY, path=target.path)
        fd = self._open_for_read(target)
        with os.fdopen(fd, "rb") as f:
            if line is None and limit is None:
                size = os.fstat(fd).st_size
                if size > self.max_read_bytes:
                    raise self._too_large(target, size)
                data = f.read(self.max_read_bytes + 1)
                if len(data) > self.max_read_bytes:  # it grew since fstat
                    raise self._too_large(target, max(size, len(data)))
                return data
            return self._read_lines(f, target, line or 1, limit)

    def _read_lines(self, f: io.BufferedReader, target: _Target, start: int, limit: int | None) -> bytes:
        readline = f.readline
        out = bytearray()
        current = 1
        taken = 0
        while limit is None or taken < limit:
            chunk: bytes = readline(_LINE_CHUNK)
            if not chunk:
                break
            if current >= start:
                out += chunk
                if len(out) > self.max_read_bytes:
                    raise self._too_large(target, len(out), window=True)
            if chunk.endswith(b"\n"):
                if current >= start:
                    taken += 1
                current += 1
        return bytes(out)

    def _too_large(self, target: _Target, size: int, *, window: bool = False) -> ServiceError:
        if window:
            message = f"the requested lines of {target.path} exceed the {self.max_read_bytes}-byte read limit"
        else:
            message = (
                f"{target.path} is {size} bytes, more than the {self.max_read_bytes}-byte read limit;"
                " read it in parts with line/limit"
            )
        return refused(message, REASON_TOO_LARGE, path=target.path, limit=self.max_read_bytes)

    def _open_for_read(self, target: _Target) -> int:
        assert target.name is not None
        dfd = _open_parents(target, create=False, verb="read")
        try:
            try:
                st = os.stat(target.name, dir_fd=dfd, follow_symlinks=False)
            except OSError as exc:
                raise _os_error(exc, target, "read") from None
            _require_regular(st.st_mode, target)
            try:
                fd = os.open(
                    target.name, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_NOCTTY | _O_CLOEXEC, dir_fd=dfd
                )
            except OSError as exc:
                raise _os_error(exc, target, "read") from None
        finally:
            os.close(dfd)
        try:
            fst = os.fstat(fd)
            if not stat.S_ISREG(fst.st_mode) or (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
                raise _changed(target)
            if _O_NONBLOCK:
                os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    # ------------------------------------------------------------------ write

    async def write_text_file(self, session: SessionLike, path: str, content: str) -> None:
        if not self.can_write:
            raise refused("writing files is disabled on this host", REASON_DISABLED, path=path)
        if not isinstance(content, str):
            raise refused('"content" must be a string', REASON_INVALID_PARAMS, path=path)
        check_absolute(path)
        roots = [*session.roots, *self.extra_roots]
        await asyncio.to_thread(self._write_text, roots, path, content)

    def _write_text(self, roots: list[str], path: str, content: str) -> None:
        target = _target_in(roots, path)
        if target.name is None:
            raise refused(f"{target.path} is a directory, not a file", REASON_IS_DIRECTORY, path=target.path)
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise refused(
                f"content for {target.path} cannot be encoded as UTF-8 ({exc.reason} at {exc.start})",
                REASON_NOT_UTF8,
                path=target.path,
            ) from None
        if len(data) > self.max_write_bytes:
            raise refused(
                f"content for {target.path} is {len(data)} bytes, more than the {self.max_write_bytes}-byte write limit",
                REASON_TOO_LARGE,
                path=target.path,
                limit=self.max_write_bytes,
            )
        self._write_bytes(target, data)

    def _write_bytes(self, target: _Target, data: bytes) -> None:
        name = target.name
        assert name is not None
        dfd = _open_parents(target, create=self.create_parents, verb="write")
        try:
            try:
                st: os.stat_result | None = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            except OSError as exc:
                raise _os_error(exc, target, "write") from None
            if st is not None:
                _require_regular(st.st_mode, target)
            tmp = f".{name[:180]}.{secrets.token_hex(6)}.acp-tmp"
            try:
                tfd = os.open(
                    tmp,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC,
                    0o600 if st is not None else 0o666,
                    dir_fd=dfd,
                )
            except OSError as exc:
                raise _os_error(exc, target, "write") from None
            try:
                try:
                    if st is not None:
                        os.fchmod(tfd, stat.S_IMODE(st.st_mode))
                        if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
                            with contextlib.suppress(OSError):
                                os.fchown(tfd, st.st_uid, st.st_gid)
                    _write_all(tfd, data)
                    os.fsync(tfd)
                finally:
                    os.close(tfd)
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException as exc:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dfd)
                if isinstance(exc, OSError):
                    raise _os_error(exc, target, "write") from None
                raise
            with contextlib.suppress(OSError):
                os.fsync(dfd)  # make the rename durable
        finally:
            os.close(dfd)


# ---------------------------------------------------------------------- helpers


def _target_in(roots: list[str], path: object) -> _Target:
    checked = check_absolute(path)
    resolved = resolve_roots(roots)
    real, root = confine(checked, resolved)
    if real == root:
        return _Target(checked, real, root, (), None)
    parts = tuple(os.path.relpath(real, root).split(os.sep))
    return _Target(checked, real, root, parts[:-1], parts[-1])


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _open_parents(target: _Target, *, create: bool, verb: str) -> int:
    """A descriptor of the target's directory, reached from its root without following symlinks.

    With ``create``, missing directories below the root are made one component at a time.
    """
    try:
        fd = os.open(target.root, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    except OSError as exc:
        raise _os_error(exc, target, verb) from None
    done = target.root
    try:
        for part in target.parents:
            done = os.path.join(done, part)
            try:
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                # O_DIRECTORY|O_NOFOLLOW on a symlink: ENOTDIR (Linux) or ELOOP.
                if exc.errno in (errno.ENOTDIR, errno.ELOOP) and _is_symlink(part, fd):
                    raise _changed(target) from None
                raise
            os.close(fd)
            fd = nfd
    except OSError as exc:
        os.close(fd)
        if isinstance(exc, FileNotFoundError):
            if verb == "read":
                message = f"file not found: {target.path} (directory {done} does not exist)"
            else:
                message = f"cannot write {target.path}: directory {done} does not exist (creating directories is disabled)"
            raise not_found(message, path=target.path) from None
        raise _os_error(exc, target, verb) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _is_symlink(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _require_regular(mode: int, target: _Target) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISLNK(mode):
        raise _changed(target)
    if stat.S_ISDIR(mode):
        raise refused(f"{target.path} is a directory, not a file", REASON_IS_DIRECTORY, path=target.path)
    raise refused(
        f"{target.path} is {_kind(mode)}; only regular files can be read or written",
        REASON_NOT_REGULAR_FILE,
        path=target.path,
    )


def _changed(target: _Target) -> ServiceError:
    return refused(
        f"{target.path} changed while being accessed (a symlink appeared along the path); refused",
        REASON_PATH_CHANGED,
        path=target.path,
    )


def _os_error(exc: OSError, target: _Target, verb: str) -> ServiceError:
    path = target.path
    reason = exc.strerror or str(exc)
    if exc.errno == errno.ENOENT:
        return not_found(f"file not found: {path}", path=path)
    if exc.errno == errno.ELOOP:
        return _changed(target)
    if exc.errno == errno.ENOTDIR:
        return refused(
            f"cannot {verb} {path}: a component of the path is not a directory",
            REASON_NOT_A_DIRECTORY,
            path=path,
        )
    if exc.errno == errno.EISDIR:
        return refused(f"{path} is a directory, not a file", REASON_IS_DIRECTORY, path=path)
    if exc.errno in (errno.EACCES, errno.EPERM):
        return refused(f"cannot {verb} {path}: permission denied", REASON_PERMISSION_DENIED, path=path)
    return failed(f"cannot {verb} {path}: {reason}", path=path, errno=exc.errno)

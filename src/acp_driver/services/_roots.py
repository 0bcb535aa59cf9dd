"""Sessions as the services see them, and confinement of paths to a session's roots."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Protocol

from ._errors import (
    REASON_INVALID_PATH,
    REASON_OUTSIDE_ROOTS,
    REASON_RELATIVE_PATH,
    REASON_SPECIAL_PATH,
    refused,
)

SPECIAL_TREES = ("/proc", "/sys", "/dev")
"""Pseudo file systems never served, even when a root contains them (``/proc/self/environ`` is
a "regular" file that holds the host's secrets; ``/dev/zero`` never ends)."""


class SessionLike(Protocol):
    """What the services need of a session (``acp_driver.driver.SessionHandle`` has it)."""

    @property
    def id(self) -> str: ...

    @property
    def cwd(self) -> str: ...

    @property
    def roots(self) -> Sequence[str]:
        """Absolute directories the agent may touch."""
        ...


def within(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or below it (by whole components: ``/a/b2`` is not in ``/a/b``)."""
    if path == root:
        return True
    prefix = root if root.endswith(os.sep) else root + os.sep
    return path.startswith(prefix)


def resolve_roots(roots: Iterable[str | os.PathLike[str]]) -> list[str]:
    """The roots with symlinks resolved, deduplicated, in order (missing ones kept as given)."""
    out: list[str] = []
    for root in roots:
        text = os.fspath(root)
        if not os.path.isabs(text):
            continue  # a relative root means nothing; ignore rather than guess
        real = os.path.realpath(text)
        if real not in out:
            out.append(real)
    return out


def check_absolute(path: object, what: str = "path") -> str:
    """``path`` as a usable absolute path string, or a ``-32602`` refusal."""
    if not isinstance(path, str) or not path:
        raise refused(f"{what} must be a non-empty string", REASON_INVALID_PATH, path=path)
    if "\0" in path:
        raise refused(f"{what} {path!r} contains a NUL byte", REASON_INVALID_PATH, path=path)
    if not os.path.isabs(path):
        raise refused(
            f"{what} {path!r} is relative; ACP paths must be absolute", REASON_RELATIVE_PATH, path=path
        )
    return path


def confine(path: str, roots: Sequence[str], *, what: str = "path") -> tuple[str, str]:
    """Resolve ``path`` (``..`` and every symlink) and return ``(real_path, its_root)``.

    Refused (``-32602``) when the resolved path is under ``/proc``, ``/sys`` or ``/dev``, or
    outside every root. ``roots`` must already be resolved (``resolve_roots``).
    """
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError) as exc:
        raise refused(f"{what} {path} cannot be resolved: {exc}", REASON_INVALID_PATH, path=path) from exc
    shown = path if real == path else f"{path} (resolves to {real})"
    for tree in SPECIAL_TREES:
        if within(real, tree):
            raise refused(
                f"{what} {shown} is under {tree}, which is never served",
                REASON_SPECIAL_PATH,
                path=path,
                resolved=real,
            )
    best: str | None = None
    for root in roots:
        if within(real, root) and (best is None or len(root) > len(best)):
            best = root
    if best is None:
        listed = ", ".join(roots) if roots else "none"
        raise refused(
            f"{what} {shown} is outside the session's roots ({listed})",
            REASON_OUTSIDE_ROOTS,
            path=path,
            resolved=real,
            roots=list(roots),
        )
    return real, best

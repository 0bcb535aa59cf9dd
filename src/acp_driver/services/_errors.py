"""Errors of the host services: JSON-RPC errors with a stable, machine-readable ``reason``."""

from __future__ import annotations

from typing import Any

from ..core import ErrorCode, RpcError


class ServiceError(RpcError):
    """A host-service request refused or failed.

    The JSON-RPC error sent to the agent carries ``message`` and ``data = {"reason": ..., ...}``;
    ``reason`` is one of the ``REASON_*`` tags below (stable, for programs), ``message`` is for
    people (it names the path or terminal and what is wrong).
    """

    def __init__(self, code: int, message: str, *, reason: str, **data: Any) -> None:
        super().__init__(code, message, {"reason": reason, **data})
        self.reason = reason


# File system
REASON_INVALID_PATH = "invalid_path"
"""Not a non-empty string, or contains a NUL byte."""
REASON_RELATIVE_PATH = "relative_path"
"""ACP file paths must be absolute."""
REASON_OUTSIDE_ROOTS = "outside_roots"
"""The path (after resolving ``..`` and symlinks) is outside every root of the session."""
REASON_SPECIAL_PATH = "special_path"
"""Under ``/proc``, ``/sys`` or ``/dev``: never served, whatever the roots."""
REASON_NOT_REGULAR_FILE = "not_regular_file"
"""A FIFO, socket, or device: only regular files are read or replaced."""
REASON_IS_DIRECTORY = "is_directory"
REASON_NOT_A_DIRECTORY = "not_a_directory"
"""A component of the path is not a directory."""
REASON_NOT_FOUND = "not_found"
REASON_TOO_LARGE = "too_large"
REASON_NOT_UTF8 = "not_utf8"
REASON_PATH_CHANGED = "path_changed"
"""A symlink appeared along the path while it was being accessed (a race): refused."""
REASON_PERMISSION_DENIED = "permission_denied"
REASON_IO_ERROR = "io_error"
REASON_INVALID_PARAMS = "invalid_params"
REASON_DISABLED = "disabled"
"""The operation is switched off (``LocalFileSystem(read=False)``...)."""

# Terminals
REASON_UNKNOWN_TERMINAL = "unknown_terminal"
REASON_RELEASED_TERMINAL = "released_terminal"
REASON_COMMAND_NOT_FOUND = "command_not_found"
REASON_SPAWN_FAILED = "spawn_failed"
REASON_CLOSED = "closed"
REASON_OWNER_ENDED = "owner_ended"


def refused(message: str, reason: str, **data: Any) -> ServiceError:
    """``-32602`` invalid params: the request cannot be served as asked."""
    return ServiceError(ErrorCode.INVALID_PARAMS, message, reason=reason, **data)


def not_found(message: str, reason: str = REASON_NOT_FOUND, **data: Any) -> ServiceError:
    """``-32002`` resource not found."""
    return ServiceError(ErrorCode.RESOURCE_NOT_FOUND, message, reason=reason, **data)


def failed(message: str, reason: str = REASON_IO_ERROR, **data: Any) -> ServiceError:
    """``-32603`` internal error: the host could not do it."""
    return ServiceError(ErrorCode.INTERNAL_ERROR, message, reason=reason, **data)

"""Host services for the driver: local files and local terminals, confined to the session's roots.

    from acp_driver.driver import ClientServices, launch
    from acp_driver.services import LocalFileSystem, LocalTerminals

    services = ClientServices(permission=..., fs=LocalFileSystem(), terminals=LocalTerminals())
    agent = await launch(["my-agent", "--acp"], services=services)

``LocalFileSystem`` serves ``fs/read_text_file`` and ``fs/write_text_file``; ``LocalTerminals``
serves ``terminal/*``. Refusals are ``ServiceError`` (a ``RpcError``) with a clear message and a
stable ``reason`` tag in the error's ``data``.
"""

from __future__ import annotations

import typing

from .. import _log  # noqa: F401  (the package logger gets its NullHandler)
from ._errors import ServiceError
from ._fs import DEFAULT_MAX_READ_BYTES, DEFAULT_MAX_WRITE_BYTES, LocalFileSystem
from ._roots import SPECIAL_TREES, SessionLike
from ._terminal import Terminal
from ._terminals import DEFAULT_OUTPUT_BYTE_LIMIT, MAX_OUTPUT_BYTE_LIMIT, LocalTerminals

if typing.TYPE_CHECKING:
    from ..driver import FileSystemService, TerminalService

    def _conforms(
        fs: LocalFileSystem, terminals: LocalTerminals
    ) -> tuple[FileSystemService, TerminalService]:
        return fs, terminals  # mypy: both implement the driver's protocols


__all__ = [
    "DEFAULT_MAX_READ_BYTES",
    "DEFAULT_MAX_WRITE_BYTES",
    "DEFAULT_OUTPUT_BYTE_LIMIT",
    "MAX_OUTPUT_BYTE_LIMIT",
    "SPECIAL_TREES",
    "LocalFileSystem",
    "LocalTerminals",
    "ServiceError",
    "SessionLike",
    "Terminal",
]

"""What the host offers the agent: permission answers, files, terminals.

``ClientServices`` bundles a permission policy with optional file-system and terminal
services; the driver advertises in ``initialize`` exactly the services that are enabled, routes
the agent's requests to them with the session (and the turn) they belong to, and cancels them
with their turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from ._permissions import PermissionPolicy, deny_all

if TYPE_CHECKING:
    from ._session import SessionHandle


class FileSystemService(Protocol):
    """Serves ``fs/read_text_file`` and ``fs/write_text_file`` for a session."""

    can_read: bool
    can_write: bool

    async def read_text_file(
        self, session: SessionHandle, path: str, line: int | None, limit: int | None
    ) -> str: ...

    async def write_text_file(self, session: SessionHandle, path: str, content: str) -> None: ...


class TerminalService(Protocol):
    """Serves the ``terminal/*`` methods. ``owner`` is the turn (or session) a terminal belongs to.

    Optionally ``async def kill_owner(owner)``: kill the owner's terminals but keep them, so the
    agent's cleanup calls still work while its cancelled turn unwinds (they are released when
    the turn ends). Without it, a cancelled turn's terminals are released at once.
    """

    async def create(self, session: SessionHandle, owner: object, params: dict[str, Any]) -> str: ...

    async def output(self, session: SessionHandle, terminal_id: str) -> dict[str, Any]: ...

    async def wait_for_exit(self, session: SessionHandle, terminal_id: str) -> dict[str, Any]: ...

    async def kill(self, session: SessionHandle, terminal_id: str) -> None: ...

    async def release(self, session: SessionHandle, terminal_id: str) -> None: ...

    async def release_owner(self, owner: object) -> None:
        """Kill and release every terminal ``owner`` created (its turn ended cancelled, its session closed)."""
        ...

    async def aclose(self) -> None:
        """Kill and release everything."""
        ...


ElicitationHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""v2: ``async def handler(params) -> {"action": "accept", "content": {...}} | {"action": "decline"}``
for an ``elicitation/create`` (a form the agent asks the user to fill); cancelled with its turn."""


class ClientServices:
    """The host side's services, advertised as client capabilities."""

    def __init__(
        self,
        *,
        permission: PermissionPolicy = deny_all,
        fs: FileSystemService | None = None,
        terminals: TerminalService | None = None,
        elicitation: ElicitationHandler | None = None,
    ) -> None:
        self.permission = permission
        self.fs = fs
        self.terminals = terminals
        self.elicitation = elicitation

    def capabilities_v2(self) -> dict[str, Any]:
        """v2's ``capabilities``: no fs or terminal methods exist there; elicitation (forms)
        when a handler is given."""
        return {"elicitation": {"form": {}}} if self.elicitation is not None else {}

    def capabilities(self) -> dict[str, Any]:
        """``clientCapabilities`` matching what is enabled (nothing more)."""
        fs = self.fs
        return {
            "fs": {
                "readTextFile": bool(fs is not None and fs.can_read),
                "writeTextFile": bool(fs is not None and fs.can_write),
            },
            "terminal": self.terminals is not None,
        }

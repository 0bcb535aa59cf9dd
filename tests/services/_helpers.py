"""Helpers for the host-services tests: fake sessions and turns, process-group checks."""

from __future__ import annotations

from dataclasses import dataclass, field

from acp_driver.services import LocalTerminals

from ..procs import group_members
from ..procs import pid_alive as pid_alive
from ..procs import wait_group_gone as procs_wait_group_gone


@dataclass(eq=False)
class FakeSession:
    """What the services need of a ``RemoteSession``."""

    id: str
    cwd: str
    roots: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.roots:
            self.roots = [self.cwd]


@dataclass(eq=False)
class FakeTurn:
    """A ``PromptTurn`` as an owner: it knows its session and whether it was cancelled."""

    session: FakeSession
    cancel_requested: bool = False


def live_members(pgid: int) -> list[str]:
    """``pid state cmdline`` of the non-zombie processes of group ``pgid``."""
    return group_members(pgid, live_only=True)


async def wait_group_gone(pgid: int, timeout: float = 15.0) -> None:
    """The group is fully gone; a live member fails at once (see ``procs.wait_group_gone``)."""
    await procs_wait_group_gone(pgid, timeout, dying_ok=False)


class RecordingTerminals(LocalTerminals):
    """``LocalTerminals`` that remembers every process group it started (for leak checks)."""

    def __init__(self, **options: object) -> None:
        super().__init__(**options)  # type: ignore[arg-type]
        self.pgids: list[int] = []

    async def create(self, session, owner, params):  # type: ignore[no-untyped-def]
        terminal_id = await super().create(session, owner, params)
        self.pgids.append(self.terminals[terminal_id].pgid)
        return terminal_id

"""Telling a session's lifecycle what a record of the wire shows.

The host's own turns tell their lifecycle (``core/_lifecycle.py``) as they read. The readers of
a wire they do not drive -- serve's relay ledger, the trace reader, ``check``'s audit -- tell it
the same events from the messages themselves, through these two functions, so that each of them
reads a prompt's answer and an update the one way. Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ._errors import ErrorCode
from ._lifecycle import Decided, Effects, SessionLifecycle

K = TypeVar("K")


def read_prompt_answer(life: SessionLifecycle[K], key: K, message: dict[str, Any]) -> list[Decided[K]]:
    """The answer to the ``session/prompt`` of ``key`` (a JSON-RPC response object): a result is
    ``answered`` (v1: the turn's end; v2: its insertion), an error ``refused`` (cancelled when
    the code is ``-32800``). Returns the lifecycle's decisions."""
    if "result" in message:
        return life.answered(key, message.get("result"))
    error = message.get("error")
    cancelled = isinstance(error, dict) and error.get("code") == ErrorCode.REQUEST_CANCELLED
    return life.refused(key, cancelled)


def read_update(life: SessionLifecycle[K], update: dict[str, Any]) -> tuple[K | None, Effects[K] | None]:
    """One ``session/update``'s ``update`` object, in the order read: its owner (None: the
    session's, or background work) and what it did besides (the turns it inserted and ended),
    taken off the lifecycle. A kind that is no string is no kind the lifecycle knows (hostile
    input: a list cannot even be looked up)."""
    kind = update.get("sessionUpdate")
    owner = life.route(update, kind if isinstance(kind, str) else None)
    effects, life.effects = life.effects, None
    return owner, effects

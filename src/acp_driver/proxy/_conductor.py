"""The proxy inside a conductor's chain: its successor reached through ``_proxy/successor``.

Launched by a conductor (acp-spec/rfd-proxy-chains.mdx; the Rust SDK's conductor) with no agent
command, the proxy has one channel, its stdin/stdout to the conductor, carrying both sides:

- the predecessor's messages come plain, ``initialize`` as ``_proxy/initialize`` (the RFD spells
  it ``proxy/initialize``: both are taken) -- that is the editor's side, relayed as ever;
- the successor is reached by wrapping: a message for it goes out as ``_proxy/successor {method,
  params}`` (a request when the inner one is, with an id of ours: its answer is the inner
  answer), and what the successor sends comes in the same way (a request carries the conductor's
  id, which the relay and the editor's side use as the inner id: the answer goes back under it).

Cancellation is hop by hop: a ``$/cancel_request`` for a request sent to the successor goes out
plain, naming OUR outer id (the conductor re-issues its own downstream); one from the conductor
naming its ``_proxy/successor`` request comes in as the inner ``$/cancel_request``. A wrapped
``$/cancel_request`` is never sent: the successor would not know our ids.

``ConductorBackend`` is the relay's ``Backend`` for that successor: nothing to spawn, signal or
reap (the ladder's last rungs only end the editor's turn, which the guard does at the budget).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from .. import protocol as p
from ..core import encode_relayed, parse_json
from ..net import id_key
from ._channel import ChannelBackend

SUCCESSOR_METHODS = frozenset({"_proxy/successor", "proxy/successor"})
"""The Rust SDK's spelling, and the RFD's."""
INITIALIZE_METHODS = frozenset({"_proxy/initialize", "proxy/initialize"})
_SUCCESSOR = "_proxy/successor"
_OUTER = "acp-driver-proxy/successor/"


class ConductorBackend(ChannelBackend):
    """The successor behind the conductor, as the relay's ``Backend`` (module docstring)."""

    def __init__(self, write: Callable[[bytes], None]) -> None:
        super().__init__()
        self._write = write
        self._ids = itertools.count(1)
        self._outer: dict[str, Any] = {}
        """Our ``_proxy/successor`` requests: outer id key -> the inner request's id."""
        self._by_inner: dict[str, Any] = {}
        """Inner id key -> our outer id (for a hop's ``$/cancel_request``)."""
        self._theirs: set[str] = set()
        """The conductor's ``_proxy/successor`` requests not answered yet (id keys)."""

    # -- the demultiplexer's question

    def owns(self, message: Any) -> bool:
        """Whether a message from the conductor is the successor's side."""
        if not isinstance(message, dict):
            return False
        method = message.get("method")
        if method in SUCCESSOR_METHODS:
            return True
        if method is None:
            return id_key(message.get("id")) in self._outer
        if method == p.CANCEL_REQUEST:
            params = message.get("params")
            target = id_key(params.get("requestId")) if isinstance(params, dict) else None
            return target is not None and target in self._theirs
        return False

    def from_conductor(self, message: dict[str, Any]) -> None:
        """A successor's-side message (``owns``), unwrapped for the relay."""
        deliver = self.deliver
        if deliver is None:
            return
        method = message.get("method")
        if method in SUCCESSOR_METHODS:
            params = message.get("params")
            if not isinstance(params, dict) or not isinstance(params.get("method"), str):
                return
            inner: dict[str, Any] = {"jsonrpc": "2.0", "method": params["method"]}
            if "params" in params:
                inner["params"] = params["params"]
            key = id_key(message.get("id"))
            if key is not None:
                inner["id"] = message["id"]
                self._theirs.add(key)
            deliver(encode_relayed(inner))
        elif method is None:
            inner_id = self._outer.pop(id_key(message.get("id")) or "", None)
            self._by_inner.pop(id_key(inner_id) or "", None)
            answer = {k: v for k, v in message.items() if k in ("result", "error")}
            deliver(encode_relayed({"jsonrpc": "2.0", "id": inner_id, **answer}))
        else:
            deliver(encode_relayed(message))  # $/cancel_request for one of theirs: the same id

    # -- Backend

    def send(self, text: bytes) -> None:
        if self._ended.is_set():
            return
        try:
            message = parse_json(text)
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        method = message.get("method")
        key = id_key(message.get("id"))
        if method is None:
            if key is not None:
                self._theirs.discard(key)
            self._write(text)  # the answer to one of the conductor's _proxy/successor requests
            return
        if method == p.CANCEL_REQUEST:
            params = message.get("params")
            target = id_key(params.get("requestId")) if isinstance(params, dict) else None
            outer = self._by_inner.get(target or "")
            if outer is not None:  # hop by hop: our own id, plain
                cancel = {"jsonrpc": "2.0", "method": p.CANCEL_REQUEST, "params": {"requestId": outer}}
                self._write(encode_relayed(cancel))
            return
        wrapped: dict[str, Any] = {"method": method}
        if "params" in message:
            wrapped["params"] = message["params"]
        outer_message: dict[str, Any] = {"jsonrpc": "2.0", "method": _SUCCESSOR, "params": wrapped}
        if key is not None:
            outer_id = f"{_OUTER}{next(self._ids)}"
            self._outer[id_key(outer_id) or ""] = message["id"]
            self._by_inner[key] = outer_id
            outer_message["id"] = outer_id
        self._write(encode_relayed(outer_message))

    def pause_output(self) -> None:
        pass  # the conductor's messages share our stdin with the editor's: never paused

    def close_input(self) -> None:
        self.ended()

    def terminate(self) -> None:
        pass  # nothing of the successor is ours to signal: the guard ends the editor's turn

    def kill(self) -> None:
        pass

    async def release(self) -> None:
        return None

    def describe(self) -> str:
        return "the successor (through the conductor)"

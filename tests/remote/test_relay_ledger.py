"""serve's relay ledger reads the agent's messages through the host's lifecycle: pure, no I/O."""

from __future__ import annotations

from typing import Any

from acp_driver.remote._relay_ledger import RelayLedger

SID = "s1"


def _v2_ledger_with_a_live_turn() -> RelayLedger:
    ledger = RelayLedger()
    ledger.from_client({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 2}})
    ledger.from_agent(
        {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 2, "capabilities": {}, "info": {}}}
    )
    ledger.from_client({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/"}})
    ledger.from_agent({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": SID}})
    ledger.from_client(
        {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": SID, "prompt": []}}
    )
    ledger.from_agent({"jsonrpc": "2.0", "id": 2, "result": {"messageId": "u1"}})
    assert ledger.version == 2
    return ledger


def _update(**update: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SID, "update": update}}


def test_an_update_whose_kind_is_no_string_is_relayed_and_the_turn_still_ends_at_its_idle() -> None:
    ledger = _v2_ledger_with_a_live_turn()
    ledger.from_agent(_update(sessionUpdate="state_update", state="running"))
    assert ledger.from_agent(_update(sessionUpdate=["a", "list"])) == SID  # routed, not raised
    assert ledger.turn_live(SID)
    ledger.from_agent(_update(sessionUpdate="state_update", state="idle", stopReason="end_turn"))
    assert not ledger.turn_live(SID)

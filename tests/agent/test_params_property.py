"""Whatever shape a client's params have, the runtime answers: a result or a clear error, never
an internal error (``-32603``) or a traceback. (A prompt block ``{"type": "text", "text": 5}``
used to raise ``TypeError`` inside the turn.)

Drawn with hypothesis, in process (``inprocess.py``): for each protocol version, requests of
every method the runtime serves, their params mixing valid members (the live session's id, an
absolute ``cwd``, content blocks of each type) with any JSON value in any member. The reference
agent serves them. Checked per example: every request answered exactly once, no ``-32603``, no
span ended with an internal error, nothing logged at ERROR, no exception left to the loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_driver.core import PROFILES
from acp_driver.reference_agent import ReferenceAgent

from ..waiting import eventually
from .inprocess import InProcessAgent

SESSION = "@SESSION@"
"""Stands for the live session's id in drawn params."""

INTERNAL_ERROR = -32603


def mostly(usual: st.SearchStrategy[Any], rare: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``usual`` about four times in five, else ``rare``."""
    return st.integers(0, 4).flatmap(lambda n: rare if n == 4 else usual)


strings = st.one_of(st.text(alphabet=st.characters(blacklist_characters="/"), max_size=8), st.just(SESSION))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**66), 2**66),
    st.floats(allow_nan=False, allow_infinity=False),
    strings,
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(strings, children, max_size=3)
    ),
    max_leaves=8,
)
KINDS = sorted({kind for profile in PROFILES.values() for kind in profile.requirements.content_blocks})
valid = {
    "string": strings,
    "object": st.fixed_dictionaries({"uri": strings, "text": strings}),
    "any": json_values,
}


def block_of(kind: str) -> st.SearchStrategy[Any]:
    """A content block of ``kind``: the members either version requires of it, each valid or any
    JSON value, and maybe others."""
    required = {
        m: t for profile in PROFILES.values() for m, t in profile.requirements.content_blocks.get(kind, ())
    }
    return st.fixed_dictionaries(
        {
            "type": st.just(kind),
            **{m: st.one_of(valid[t], json_values) for m, t in required.items()},
        },
        optional={m: json_values for m in ("annotations", "_meta", "mimeType") if m not in required},
    )


blocks = mostly(st.sampled_from([*KINDS, "_custom", "future"]).flatmap(block_of), json_values)
MEMBERS: dict[str, Any] = {
    "sessionId": mostly(st.just(SESSION), scalars),
    "cwd": st.one_of(st.just("/"), st.just("relative"), scalars),
    "mcpServers": st.one_of(st.just([]), json_values),
    "prompt": st.one_of(st.lists(blocks, min_size=1, max_size=3), st.lists(blocks, max_size=3), json_values),
    "protocolVersion": st.one_of(st.sampled_from([1, 2]), scalars),
    "info": json_values,
    "capabilities": json_values,
    "clientCapabilities": json_values,
    "replayFrom": st.one_of(st.just({"type": "start"}), json_values),
    "modeId": st.one_of(st.sampled_from(["default", "plan"]), scalars),
    "configId": scalars,
    "value": json_values,
    "type": scalars,
    "methodId": scalars,
    "toolCallId": scalars,
    "cursor": scalars,
    "additionalDirectories": json_values,
    "_meta": json_values,
}
METHODS = [
    "initialize",
    "session/new",
    "session/load",
    "session/resume",
    "session/list",
    "session/close",
    "session/set_mode",
    "session/set_config_option",
    "session/prompt",
    "session/cancel",
    "tool_call/cancel",
    "authenticate",
    "auth/login",
]


def params_for(method: str) -> st.SearchStrategy[tuple[str, Any]]:
    """``(method, params)``: mostly an object with the members either version requires of the
    method (each drawn valid or not) and any others; sometimes any JSON value."""
    required = {m for profile in PROFILES.values() for m, _ in profile.requirements.methods.get(method, ())}
    members = st.fixed_dictionaries(
        {name: MEMBERS[name] for name in sorted(required)},
        optional={name: strategy for name, strategy in MEMBERS.items() if name not in required},
    )
    return st.tuples(st.just(method), mostly(members, json_values))


requests = st.lists(
    st.sampled_from([*METHODS, "session/prompt", "session/prompt"]).flatmap(params_for),
    min_size=1,
    max_size=4,
)


def bind(value: Any, session_id: str) -> Any:
    if value == SESSION:
        return session_id
    if isinstance(value, list):
        return [bind(v, session_id) for v in value]
    if isinstance(value, dict):
        return {k: bind(v, session_id) for k, v in value.items()}
    return value


async def serve(version: int, drawn: list[tuple[str, Any]]) -> InProcessAgent:
    served = InProcessAgent(ReferenceAgent())
    errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: errors.append(context))
    try:
        if version == 2:
            await served.start_v2()
        else:
            assert "result" in await served.answered(served.request("initialize", {"protocolVersion": 1}))
            opened = await served.answered(served.request("session/new", {"cwd": "/", "mcpServers": []}))
            served.session_id = opened["result"]["sessionId"]
        ids = []
        for method, drawn_params in drawn:
            bound = bind(drawn_params, served.session_id)
            if method == "session/cancel":
                served.feed(served.message(method, bound))
            else:
                ids.append(served.request(method, bound))
        for request_id in ids:
            await served.answered(request_id)
        sessions = served.runtime.sessions.values()
        await eventually(lambda: all(s.turn is None and not s.held for s in sessions), "every turn ended")
        for request_id in ids:
            answers = [m for m in served.sent if "method" not in m and m.get("id") == request_id]
            assert len(answers) == 1, answers
            assert answers[0].get("error", {}).get("code") != INTERNAL_ERROR, (drawn, answers[0])
        for update in served.updates("state_update"):
            assert update.get("error", {}).get("code") != INTERNAL_ERROR, (drawn, update)
        assert errors == []
        return served
    finally:
        await served.close()


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(version=st.sampled_from([1, 2]), drawn=requests)
def test_any_params_get_an_answer_never_an_internal_error(
    caplog: pytest.LogCaptureFixture, version: int, drawn: list[tuple[str, Any]]
) -> None:
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="acp_driver"):
        asyncio.run(serve(version, drawn))
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [], drawn


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(version=st.sampled_from([1, 2]), prompt=st.lists(blocks, min_size=1, max_size=3))
def test_any_prompt_blocks_get_an_answer_never_an_internal_error(
    caplog: pytest.LogCaptureFixture, version: int, prompt: list[Any]
) -> None:
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="acp_driver"):
        asyncio.run(serve(version, [("session/prompt", {"sessionId": SESSION, "prompt": prompt})]))
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [], prompt


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize(
    "block",
    [
        {"type": "text", "text": 5},
        {"type": "text", "text": None},
        {"type": "text", "text": ["a"]},
        {"type": "text"},
        {"type": "image", "data": 1, "mimeType": "image/png"},
        {"type": "resource_link", "uri": "file:///x"},
        {"type": "resource", "resource": "file:///x"},
    ],
)
def test_a_prompt_block_without_what_its_type_requires_is_invalid_params(
    caplog: pytest.LogCaptureFixture, version: int, block: dict[str, Any]
) -> None:
    async def story() -> None:
        served = InProcessAgent(ReferenceAgent())
        try:
            if version == 2:
                await served.start_v2()
            else:
                await served.answered(served.request("initialize", {"protocolVersion": 1}))
                opened = await served.answered(served.request("session/new", {"cwd": "/", "mcpServers": []}))
                served.session_id = opened["result"]["sessionId"]
            answer = await served.answered(
                served.request("session/prompt", {"sessionId": served.session_id, "prompt": [block]})
            )
            assert answer["error"]["code"] == -32602
            assert "prompt[0]" in answer["error"]["message"]
            assert served.updates() == []  # no turn
        finally:
            await served.close()

    with caplog.at_level(logging.ERROR, logger="acp_driver"):
        asyncio.run(story())
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []

"""No process of the agent outlives the proxy: the editor closes its input, signals it, or
SIGKILLs it, and the whole tree -- a tool in its own session (``setsid``) included -- is gone."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from .editor import Editor

# The reference agent with a tool it started in a session of its own, as real agents' shells are.
AGENT_WITH_TOOL = [
    "sh",
    "-c",
    f"setsid sleep 300 & exec {sys.executable} -m acp_driver agent",
]


async def _started() -> Editor:
    editor = await Editor.start(AGENT_WITH_TOOL, "--cancel-budget", "1")
    sid = await editor.open_session()
    editor.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/sleep 30000"}]})
    assert len(editor.tree) >= 3, editor.tree  # the supervisor, the agent, its tool
    return editor


async def test_the_editor_closing_its_input_mid_turn_reaps_the_whole_tree() -> None:
    editor = await _started()
    try:
        assert await editor.close() == 0
        await editor.tree_gone()
    finally:
        await editor.aclose()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
async def test_a_signal_to_the_proxy_reaps_the_whole_tree(signum: signal.Signals) -> None:
    editor = await _started()
    try:
        os.kill(editor.process.pid, signum)
        assert await editor.exited() == 0, editor.report()
        await editor.tree_gone()
    finally:
        await editor.aclose()


async def test_a_sigkilled_proxy_leaves_no_process_behind() -> None:
    editor = await _started()
    try:
        editor.kill()
        await editor.process.wait()
        await editor.tree_gone()
    finally:
        await editor.aclose()

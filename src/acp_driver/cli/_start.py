"""Bringing an agent to a session for ``run`` and ``chat``: spawn (or connect), ``initialize``,
``authenticate``, ``session/new``; every failure reported once, as one line."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from collections.abc import Awaitable
from typing import Any

from ..core import DEFAULT_BUDGET, AcpError, LadderPolicy, RpcError
from ..driver import AgentExitedError, AgentHandle, AgentStartError, ClientServices, SessionHandle, connect
from . import _codes as codes
from ._controller import Controller, signal_name
from ._remote_options import credentials_hint
from ._render import Output


class StartFailed(Exception):
    """The agent could not be started, authenticated or given a session (already reported)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


AUTH_REQUIRED = -32000
"""ACP's ``auth_required`` error code."""


def _auth_vars(method: dict[str, Any]) -> list[str]:
    """The environment variables an ``env_var`` method reads (``vars: [{"name": ...}]``)."""
    found = method.get("vars")
    if not isinstance(found, list):
        return []
    return [str(v["name"]) for v in found if isinstance(v, dict) and isinstance(v.get("name"), str)]


def _auth_offer(agent: AgentHandle) -> str:
    methods = [m for m in agent.auth_methods if isinstance(m.get("id"), str)]
    if not methods:
        return "the agent advertises no authentication method (log in with the agent's own tool)"
    listed = []
    for method in methods:
        kind = method.get("type") or "agent"
        name = method.get("name") or method["id"]
        note = ""
        if kind == "terminal":
            note = " — a terminal login, run outside ACP"
        elif _auth_vars(method):
            note = f" — set {', '.join(_auth_vars(method))} in the environment"
        listed.append(f"{method['id']} ({name}){note}")
    return "methods offered: " + "; ".join(listed)


def protocol_option(opts: Any) -> Any:
    """``--protocol``: ``auto``, or the version as a number."""
    value = getattr(opts, "protocol", "auto")
    return value if value == "auto" else int(value)


async def _authenticate(agent: AgentHandle, method_id: str, output: Output) -> None:
    method = next((m for m in agent.auth_methods if m.get("id") == method_id), None)
    if method is None:
        output.error(f"--auth {method_id}: the agent does not offer this method; {_auth_offer(agent)}")
        raise StartFailed(codes.EXIT_ERROR)
    if method.get("type") == "terminal":
        # Spec: a terminal method is never sent to authenticate; the user runs the login.
        args = method.get("args")
        login = " ".join(str(a) for a in args) if isinstance(args, list) else ""
        output.error(
            f"--auth {method_id} is a terminal login: run the agent's command with "
            f"{login or 'its login arguments'} in a terminal, then retry without --auth"
        )
        raise StartFailed(codes.EXIT_ERROR)
    try:
        await agent.authenticate(method_id)
    except (AcpError, RpcError) as exc:
        unset = [name for name in _auth_vars(method) if not os.environ.get(name)]
        hint = f" ({', '.join(unset)} not set: this method reads it from the environment)" if unset else ""
        output.error(f"authenticate with {method_id!r} failed: {exc}{hint}")
        raise StartFailed(
            codes.EXIT_AGENT_EXITED if isinstance(exc, AgentExitedError) else codes.EXIT_ERROR
        ) from None
    output.note(f"authenticated with {method_id}")


async def start_session(
    opts: argparse.Namespace,
    argv: list[str],
    cwd: str,
    output: Output,
    services: ClientServices,
    controller: Controller,
) -> SessionHandle:
    """Spawn (or connect to) and initialize the agent, authenticate, open a session, set its
    mode (``--mode``); ``controller.agent`` is set as soon as the agent exists."""
    budget = DEFAULT_BUDGET if opts.cancel_budget is None else opts.cancel_budget
    url: str | None = getattr(opts, "agent_url", None)
    try:
        if url is not None:
            agent = await connect(
                url,
                headers=getattr(opts, "headers", None),
                ssl_context=getattr(opts, "ssl_context", None),
                services=services,
                ladder=LadderPolicy(budget=budget),
                on_connect=controller.took,
                trace=getattr(opts, "trace", None),
                protocol=protocol_option(opts),
            )
        else:
            agent = await AgentHandle.launch(
                argv,
                cwd=cwd,
                services=services,
                ladder=LadderPolicy(budget=budget),
                on_spawn=controller.took,  # a signal during initialize can then reach the agent
                trace=getattr(opts, "trace", None),
                protocol=protocol_option(opts),
            )
    except AgentStartError as exc:
        output.error(f"agent failed to start: {exc}{credentials_hint(exc) if url is not None else ''}")
        raise StartFailed(codes.EXIT_ERROR) from None
    except (ValueError, OSError) as exc:  # a URL or a connection a transport refused its own way
        output.error(f"cannot connect to {url}: {exc}")
        raise StartFailed(codes.EXIT_ERROR) from None
    controller.agent = agent
    agent.on_ladder_step = controller.on_step
    output.agent_started(agent)
    if opts.auth is not None:
        await _authenticate(agent, opts.auth, output)
    continued: str | None = getattr(opts, "session", None)
    try:
        if continued is not None:
            session = await _continue_session(agent, continued, cwd, output)
        else:
            session = await agent.new_session(cwd)
    except (AcpError, RpcError) as exc:
        message = f"{_opening(agent, continued)} failed: {exc}"
        if isinstance(exc, RpcError) and exc.code == AUTH_REQUIRED:
            message += f"\nthe agent requires authentication: pass --auth METHOD_ID; {_auth_offer(agent)}"
        output.error(message)
        raise StartFailed(_failed_code(exc)) from None
    mode: str | None = getattr(opts, "mode", None)
    if mode is not None:
        try:
            await session.set_mode(mode)
        except (AcpError, RpcError) as exc:
            output.error(
                f"--mode {mode}: {_mode_request(session, mode)} failed: {exc}{_modes_offer(session)}"
            )
            raise StartFailed(_failed_code(exc)) from None
        output.note(f"mode: {mode}")
    return session


def _opening(agent: AgentHandle, continued: str | None) -> str:
    """The request that opens the session: ``session/new``, or what continues ``--session``."""
    if continued is None:
        return "session/new"
    method = "session/resume" if agent.supports("resume") else "session/load"
    return f"{method} {continued!r}"


async def _continue_session(agent: AgentHandle, session_id: str, cwd: str, output: Output) -> SessionHandle:
    """``--session ID``: ``session/resume`` (no replay), else ``session/load`` (the agent replays
    the history first), as the agent advertises; neither is a start error naming both."""
    if agent.supports("resume"):
        return await agent.resume_session(session_id, cwd)
    if agent.supports("load"):
        return await agent.load_session(session_id, cwd)
    output.error(
        f"--session {session_id}: the agent advertises neither session/resume nor session/load, "
        "so it cannot continue a session (leave --session out to open a new one)"
    )
    raise StartFailed(codes.EXIT_ERROR)


def _failed_code(exc: Exception) -> int:
    return codes.EXIT_AGENT_EXITED if isinstance(exc, AgentExitedError) else codes.EXIT_ERROR


def _mode_request(session: SessionHandle, mode: str) -> str:
    """What ``set_mode`` sent: v2 has no modes, it sets the ``mode`` config option."""
    if session.life.profile.modes_are_options:
        return f'session/set_config_option (configId "mode", type "id", value {mode!r})'
    return "session/set_mode"


def _modes_offer(session: SessionHandle) -> str:
    """The modes the agent offered in ``session/new`` (v1: ``modes.availableModes``; v2: the
    values of its ``mode`` config option), if any."""
    if session.life.profile.modes_are_options:
        values = _config_values(session.config_options, "mode")
        return f"; the agent offers: {', '.join(values)}" if values else "; the agent offered no mode option"
    modes = session.modes.get("availableModes") if session.modes is not None else None
    ids = [str(m["id"]) for m in modes or [] if isinstance(m, dict) and "id" in m]
    return f"; the agent offers: {', '.join(ids)}" if ids else "; the agent offered no modes"


def _config_values(options: list[Any] | None, config_id: str) -> list[str]:
    """The values a select config option offers (flat, or in groups)."""
    option = next((o for o in options or [] if isinstance(o, dict) and o.get("configId") == config_id), None)
    listed = option.get("options") if option is not None else None
    values: list[str] = []
    for entry in listed if isinstance(listed, list) else []:
        if not isinstance(entry, dict):
            continue
        group = entry.get("options")
        for item in group if isinstance(group, list) else [entry]:
            if isinstance(item, dict) and isinstance(item.get("value"), str):
                values.append(item["value"])
    return values


async def abortable_start(controller: Controller, starting: Awaitable[SessionHandle]) -> SessionHandle | int:
    """Run the start as its own task (so a signal can abort it); a session or an exit code."""
    startup: asyncio.Task[SessionHandle] = asyncio.ensure_future(starting)
    controller.startup = startup
    session: SessionHandle | None = None
    try:
        session = await startup
    except StartFailed as failed:
        return failed.code
    except asyncio.CancelledError:
        aborted = controller.signum is not None or controller.lost_output is not None
        if asyncio.current_task().cancelling() or not aborted:  # type: ignore[union-attr]
            raise
    signum = controller.signum
    if signum is None and controller.lost_output is None and session is not None:
        return session
    if signum is None and controller.lost_output is not None:
        return codes.EXIT_ERROR  # already said on stderr
    # Aborted by a signal (or one came as the start completed): exit_code() gives 128 + signum.
    what = "Ctrl-C" if signum in (None, signal.SIGINT) else signal_name(signum)
    controller.say(controller.output.error, f"{what} while the agent was starting: aborted")
    return codes.EXIT_INTERRUPTED

"""Fixtures for the server's tests: servers on loopback ports, stopped (agents reaped) after each test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from acp_driver.remote import RemoteServer, serve_agent, serve_command

from .serving import REFERENCE


@pytest.fixture
async def make_server() -> AsyncIterator[Callable[..., Any]]:
    """``await make_server(argv=None | [...], agent=None | factory, **settings)``: a started server."""
    servers: list[RemoteServer] = []

    async def make(
        argv: list[str] | None = None, agent: Callable[[], Any] | None = None, **options: Any
    ) -> RemoteServer:
        options.setdefault("port", 0)
        options.setdefault("cancel_budget", 2.0)
        if agent is not None:
            server = await serve_agent(agent, **options)
        else:
            server = await serve_command(argv or REFERENCE, **options)
        servers.append(server)
        return server

    yield make
    for server in servers:
        await server.aclose()
        assert server.connections == {}, "a connection outlived the server"

"""The CLI's answer to the agent's permission requests: ``--yes``, ``--deny``, or ask on a TTY."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from typing import Any

from ..aio import current_request
from ..driver import PermissionRequest
from ._render import Output
from ._stdin import StdinLines
from ._text import shown


class Permissions:
    """The CLI's permission policy: --yes / --deny, else ask on a TTY, else deny."""

    def __init__(
        self, opts: argparse.Namespace, output: Output, lines: Callable[[], StdinLines] | None
    ) -> None:
        self._output = output
        self._lines = lines
        self.asking: Callable[[bool], object] | None = None
        """Told when a question is put to the user (True) and when it is closed (False): the
        time the user takes to answer is not the turn's (``Controller.asking``)."""
        self._why_deny = "--deny" if opts.deny else "not a TTY"
        if opts.yes:
            self.mode = "yes"
        elif opts.deny or lines is None:
            self.mode = "deny"
        else:
            self.mode = "ask"

    async def __call__(self, request: PermissionRequest) -> dict[str, Any]:
        if self.mode == "yes":
            outcome = request.allow()
            self._output.permission(request, outcome, "--yes")
            return outcome
        if self.mode == "deny":
            outcome = request.reject()
            self._output.permission(request, outcome, self._why_deny)
            return outcome
        ctx = current_request()
        if self.asking is not None:
            self.asking(True)
        try:
            outcome = await self._ask(request)
        except asyncio.CancelledError:
            if request.cancelled_by_turn or ctx is None or not ctx.cancel_requested:
                # this host cancelled the turn (the agent may have withdrawn it in answer, too):
                # the driver answers the request cancelled
                self._output.permission(request, {"outcome": "cancelled"}, "the turn was cancelled")
            else:  # the agent's $/cancel_request alone
                self._output.note("permission request withdrawn by the agent")
            raise
        finally:
            if self.asking is not None:
                self.asking(False)
        self._output.permission(request, outcome, "you")
        return outcome

    async def _ask(self, request: PermissionRequest) -> dict[str, Any]:
        assert self._lines is not None
        output = self._output
        output.waiting(False)
        output.aside()
        options = [o for o in request.options if isinstance(o.get("optionId"), str)]
        err = sys.stderr
        err.write(f"\nThe agent asks permission: {shown(request.title)}\n")
        if not options:
            err.write("  (it offers no option to choose: rejected)\n")
            return request.reject()
        for i, option in enumerate(options, 1):
            name = shown(option.get("name", option["optionId"]))
            err.write(f"  {i}) {name} [{shown(option.get('kind', ''))}]\n")
        reader = self._lines()
        while True:
            err.write(f"choose 1-{len(options)}: ")
            err.flush()
            line = await reader.readline()
            if line is None:
                return request.reject()
            choice = line.strip()
            if choice.isdigit() and 1 <= int(choice) <= len(options):
                return request.select(str(options[int(choice) - 1]["optionId"]))

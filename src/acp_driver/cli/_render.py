"""Rendering a turn: live on a console, or as JSON lines.

Console: the agent's message text goes to stdout (so ``acp-driver run ... > answer.txt`` keeps
only the answer); thoughts, tool calls, the plan, permission questions, cancel progress and the
spinner go to stderr. Colour only on a TTY, never with ``NO_COLOR``. Whatever the agent sent is
shown by the rule of ``_text``: as text (``rich.text.Text``, never markup), never as control.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from ..core import Rung
from ..driver import PermissionRequest, TurnResult, Update
from ._text import json_text, shown

if TYPE_CHECKING:
    from rich.text import Text

LADDER_TEXT = {
    Rung.SESSION_CANCEL: "sent session/cancel",
    Rung.CANCEL_REQUEST: "no answer yet: sent $/cancel_request for the prompt",
    Rung.TERMINATE: "still no answer: SIGTERM to the agent's process group",
    Rung.KILL: "SIGKILL to the agent's process group",
}

LADDER_EFFECT = {
    Rung.SESSION_CANCEL.value: "session/cancel",
    Rung.CANCEL_REQUEST.value: "$/cancel_request",
    Rung.TERMINATE.value: "SIGTERM",
    Rung.KILL.value: "SIGKILL",
}
"""Which ladder step took effect, for ``CancelOutcome.resolved_by``."""

REMOTE_LADDER_TEXT = {
    **LADDER_TEXT,
    Rung.TERMINATE: "still no answer: closing the connection (the server ends the agent's work)",
    Rung.KILL: "aborting the connection",
}
REMOTE_LADDER_EFFECT = {
    **LADDER_EFFECT,
    Rung.TERMINATE.value: "closing the connection",
    Rung.KILL.value: "aborting the connection",
}
"""For a remote agent (``connect``): TERMINATE and KILL end the connection, not a process."""

V2_LADDER_TEXT = {
    Rung.SESSION_CANCEL: "sent session/cancel",
    Rung.CANCEL_REQUEST: "no idle yet: $/cancel_request for the prompts still held",
    Rung.TERMINATE: "still no idle: SIGTERM to the agent's process group",
}
"""v2: the turn ends with an idle, and the middle rung withdraws the held prompts (the running
turn's prompt was answered when it was inserted)."""

STATUS_MARK = {"pending": "·", "in_progress": "…", "completed": "✓", "failed": "✗"}
PLAN_MARK = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


def cancelled_by(result: TurnResult) -> str | None:
    """Who cancelled the turn: ``host`` whenever this host's cancel took effect, whatever rung
    did it (a turn the ladder had to terminate or kill ends ``killed``/``agent_exited``, not
    ``cancelled``), ``agent`` for an unasked ``cancelled``, else None."""
    if result.cancelled_by is not None:
        return result.cancelled_by
    cancel = result.cancel
    if cancel is not None and cancel.resolved_by in LADDER_EFFECT:
        return "host"
    return None


class Output:
    """What the CLI reports; subclasses render it."""

    def agent_started(self, agent: Any) -> None: ...
    def session_started(self, session: Any) -> None: ...
    def prompt_sent(self, turn: Any) -> None: ...
    def update(self, update: Update) -> None: ...
    def permission(self, request: PermissionRequest, outcome: dict[str, Any], how: str) -> None: ...
    def cancelling(self, reason: str) -> None: ...
    def ladder_step(self, rung: Rung, elapsed: float) -> None: ...
    def result(self, result: TurnResult, waited: float = 0.0) -> None: ...
    def error(self, message: str) -> None: ...
    def note(self, message: str) -> None: ...
    def waiting(self, active: bool) -> None: ...
    def aside(self) -> None:
        """Something else is about to be written on the terminal (a question)."""

    def close(self) -> None: ...


class JsonOutput(Output):
    """One JSON object per line on stdout; the last is ``{"type": "result", ...}``.

    Every update of the session is an ``update`` event, as it arrives (``listen``): the turn's,
    and those no turn yields (v2's ``state_update``, the session's commands, title, usage)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._out = stream or sys.stdout
        self._listening = False

    def listen(self, session: Any) -> None:
        """Emit each of ``session``'s updates when it is read, until the result."""
        self._listening = True
        session.listeners.append(self._session_update)

    def _session_update(self, update: Update) -> None:
        if self._listening:
            self._emit({"type": "update", "sessionId": update.session_id, "update": update.raw})

    def _emit(self, obj: dict[str, Any]) -> None:
        self._out.write(json_text(obj) + "\n")
        self._out.flush()

    def agent_started(self, agent: Any) -> None:
        self._protocol = agent.protocol_version
        self._emit(
            {
                "type": "agent",
                "info": agent.info,
                "protocolVersion": agent.protocol_version,
                "capabilities": agent.capabilities,
                "authMethods": agent.auth_methods,
                "pid": None if agent.remote else agent.process.pid,
                "url": getattr(agent, "url", None),
            }
        )

    def session_started(self, session: Any) -> None:
        self._emit({"type": "session", "sessionId": session.id, "cwd": session.cwd})

    def prompt_sent(self, turn: Any) -> None:
        self._emit({"type": "prompt", "sessionId": turn.session.id, "requestId": turn.request_id})

    def update(self, update: Update) -> None:
        if not self._listening:  # else already emitted, when it was read
            self._emit({"type": "update", "sessionId": update.session_id, "update": update.raw})

    def permission(self, request: PermissionRequest, outcome: dict[str, Any], how: str) -> None:
        self._emit(
            {
                "type": "permission",
                "sessionId": request.session_id,
                "toolCall": request.tool_call,
                "options": request.options,
                "outcome": outcome,
                "decidedBy": how,
            }
        )

    def cancelling(self, reason: str) -> None:
        self._emit({"type": "cancel", "reason": reason})

    def ladder_step(self, rung: Rung, elapsed: float) -> None:
        self._emit({"type": "ladder", "step": rung.value, "elapsedMs": round(elapsed * 1000, 3)})

    def result(self, result: TurnResult, waited: float = 0.0) -> None:
        self._listening = False  # the result is the last line
        obj: dict[str, Any] = {
            "type": "result",
            "protocolVersion": getattr(self, "_protocol", None),
            "stopReason": result.stop_reason,
            "resolution": result.resolution.value,
            "elapsedMs": round(result.elapsed * 1000, 3),
            "cancelledBy": cancelled_by(result),
        }
        if result.error is not None:
            obj["error"] = {"code": result.error.code, "message": result.error.message}
        if result.cancel is not None:
            obj["cancel"] = {
                "resolvedBy": result.cancel.resolved_by,
                "steps": list(result.cancel.steps),
                "elapsedMs": round(result.cancel.elapsed * 1000, 3),
            }
        self._emit(obj)

    def error(self, message: str) -> None:
        self._emit({"type": "error", "message": message})

    def note(self, message: str) -> None:
        self._emit({"type": "note", "message": message})


class ConsoleOutput(Output):
    """Live rendering for people.

    ``separate_turns`` (``chat``): each turn's answer ends with a line feed on stdout, so that
    answers never run together, terminal or not. ``run`` off a terminal writes the answer exactly
    as the agent sent it."""

    def __init__(self, *, quiet: bool = False, separate_turns: bool = False) -> None:
        from rich.console import Console

        # NO_COLOR (no-color.org) is set, even empty: no styling at all (rich's no_color keeps
        # bold and dim; without a colour system it writes plain text).
        plain = "NO_COLOR" in os.environ
        style: dict[str, Any] = {"color_system": None} if plain else {}
        self.out = Console(file=sys.stdout, highlight=False, soft_wrap=True, **style)
        self.err = Console(file=sys.stderr, highlight=False, soft_wrap=True, **style)
        self.quiet = quiet
        self.separate_turns = separate_turns
        self._remote = False
        self._protocol: int | None = None
        self._stream: str | None = None  # "message" or "thought": what the last chunk was
        self._answer_open = False
        """The answer's last line on stdout has no line feed yet."""
        self._thought_open = False
        self._status: Any = None
        self._spinner_task: asyncio.Task[None] | None = None
        self._tool_status: dict[str, str | None] = {}
        self._tool_titles: dict[str, str] = {}
        self._cancel_started: float | None = None
        self._plan_shown: list[str] | None = None
        """The plan's entries as last shown (None: no plan yet)."""
        self._plan_rows = 0
        """The terminal rows the plan took, counted when it was drawn."""
        self._plan_mark = -1
        self._shown_count = 0
        """Counts what was shown on either stream: the plan is redrawn in place only if it did
        not move since the plan was drawn."""

    # ------------------------------------------------------------------ plumbing

    def _end_line(self, *, turn_over: bool = False) -> None:
        """End an open thought line (stderr); end the answer's line (stdout) on a terminal, where
        it shares the screen with stderr, or at the end of a turn with ``separate_turns``."""
        if self._thought_open:
            self.err.file.write("\n")
            self.err.file.flush()
            self._thought_open = False
        if self._answer_open and (
            self.out.is_terminal or self.err.is_terminal or (turn_over and self.separate_turns)
        ):
            self.out.file.write("\n")
            self.out.file.flush()
            self._answer_open = False
        self._stream = None

    def _info(self, text: Text) -> None:
        if self.quiet:
            return
        self._hide_spinner()
        self._end_line()
        self.err.print(text)
        self._shown_count += 1

    def aside(self) -> None:
        self._hide_spinner()
        self._end_line()
        self._shown_count += 1

    def waiting(self, active: bool) -> None:
        if not self.err.is_terminal or self.quiet:
            return
        if active:
            if self._spinner_task is None:
                self._spinner_task = asyncio.get_running_loop().create_task(self._show_spinner_later())
        else:
            self._hide_spinner()

    async def _show_spinner_later(self) -> None:
        await asyncio.sleep(0.25)
        if self._status is None:
            self._end_line()
            self._status = self.err.status("[dim]waiting for the agent…[/dim]", spinner="dots")
            self._status.start()

    def _hide_spinner(self) -> None:
        if self._spinner_task is not None:
            self._spinner_task.cancel()
            self._spinner_task = None
        if self._status is not None:
            self._status.stop()
            self._status = None

    def close(self) -> None:
        self._hide_spinner()
        self._end_line(turn_over=True)

    # ------------------------------------------------------------------ events

    def agent_started(self, agent: Any) -> None:
        self._remote = bool(agent.remote)
        self._protocol = agent.protocol_version
        info = agent.info or {}
        name = info.get("title") or info.get("name") or agent.name
        self._info(
            _text(
                (
                    f"agent: {shown(name)} {shown(info.get('version', ''))} ({shown(agent.where)}), "
                    f"ACP v{agent.protocol_version}",
                    "dim",
                )
            )
        )
        note = getattr(agent, "negotiation_note", None)
        if note:
            self._info(_text((f"note: {note}", "yellow")))

    def session_started(self, session: Any) -> None:
        sid = shown(session.id)
        self._info(_text((f"session: {sid} (continue it with --session {shlex.quote(sid)})", "dim")))

    def update(self, update: Update) -> None:
        self._hide_spinner()
        kind = update.kind
        if kind == "agent_message_chunk":
            text = shown(update.text, lines=True)  # type: ignore[attr-defined]
            if self._stream != "message":
                self._end_line()
                self._stream = "message"
            if text:
                self.out.file.write(text)
                self.out.file.flush()
                self._shown_count += 1
                self._answer_open = not text.endswith("\n")
            return
        if self.quiet:
            return
        if kind == "agent_thought_chunk":
            text = shown(update.text, lines=True)  # type: ignore[attr-defined]
            if self._stream != "thought":
                self._end_line()
                self._stream = "thought"
                self.err.print(_text(("thinking: ", "dim italic")), end="")
            self.err.print(_text((text, "dim italic")), end="")
            self._shown_count += 1
            self._thought_open = not text.endswith("\n")
            if not self._thought_open:
                self._stream = None
        elif kind in ("tool_call", "tool_call_update"):
            self._tool(update)
        elif kind == "agent_message" and isinstance(update.raw.get("content"), list):
            # v2: a whole message (an upsert): its text, as a chunk would show it.
            texts = [
                b.get("text")
                for b in update.raw["content"]
                if isinstance(b, dict) and b.get("type") == "text"
            ]
            if texts:
                self._end_line()
                self.out.file.write(shown("".join(str(t) for t in texts), lines=True))
                self.out.file.flush()
                self._shown_count += 1
                self._answer_open = True
        elif kind in ("plan", "plan_update"):
            plan = update.raw.get("plan") if kind == "plan_update" else update.raw
            self._plan(plan.get("entries") if isinstance(plan, dict) else None)
        elif kind == "session_info_update" and update.raw.get("title"):
            self._info(_text((f"title: {shown(update.raw['title'])}", "dim")))
        elif kind == "current_mode_update":
            self._info(_text((f"mode: {shown(update.raw.get('currentModeId'))}", "dim")))
        elif kind == "notice":
            message = update.raw.get("message") or update.raw.get("text") or ""
            self._info(_text((f"notice: {shown(message)}", "dim")))

    def _plan(self, raw_entries: Any) -> None:
        """The plan, replaced whole by each update. On a terminal it is redrawn in place while
        nothing was shown after it (else drawn again below). Off a terminal the first plan is
        shown whole, a later one with as many entries as the entries that changed, one line
        each (``plan: [x] Run the tests``), one with other entries whole again."""
        entries = [
            f"{PLAN_MARK.get(str(e.get('status')), '[?]')} {shown(e.get('content', ''))}"
            for e in (raw_entries if isinstance(raw_entries, list) else [])
            if isinstance(e, dict)
        ]
        previous, self._plan_shown = self._plan_shown, entries
        if self.quiet:
            return
        if previous is not None and self._plan_rows and self.err.is_terminal and self._at_plan():
            self._hide_spinner()
            self.err.file.write(f"\x1b[{self._plan_rows}F\x1b[J")  # up to the plan's first row, clear
            self._plan_rows = 0
        elif previous is not None:
            changed = [e for i, e in enumerate(entries) if i >= len(previous) or previous[i] != e]
            if len(entries) == len(previous) and not self.err.is_terminal:
                for entry in changed:
                    self._info(_text(("plan: ", "bold"), entry))
                return
        self._info(_text(("plan", "bold"), *(f"\n  {entry}" for entry in entries)))
        if self.err.is_terminal:
            from rich.cells import cell_len

            width = max(self.err.width, 1)
            rows = ["plan", *(f"  {entry}" for entry in entries)]
            self._plan_rows = sum(max(1, -(-cell_len(row) // width)) for row in rows)
            self._plan_mark = self._shown_count

    def _at_plan(self) -> bool:
        """Nothing was shown since the plan (so it is the last thing on the screen)."""
        return self._plan_mark == self._shown_count

    def _tool(self, update: Update) -> None:
        raw = update.raw
        tid = str(raw.get("toolCallId"))
        status = raw.get("status")
        if update.kind == "tool_call" or tid not in self._tool_titles:  # v2: an update creates it
            title = shown(raw.get("title") or tid)
            kind = raw.get("kind") or "other"
            self._tool_status[tid] = status
            mark = STATUS_MARK.get(str(status), "·")
            self._info(_text((f"{mark} {title}", "cyan"), " ", (f"({shown(kind)}, {shown(status)})", "dim")))
            self._tool_titles[tid] = title
            return
        if status is not None and status != self._tool_status.get(tid):
            self._tool_status[tid] = status
            title = shown(raw.get("title")) if raw.get("title") else self._tool_titles.get(tid, shown(tid))
            colour = {"completed": "green", "failed": "red"}.get(str(status), "cyan")
            mark = STATUS_MARK.get(str(status), "·")
            self._info(_text((f"{mark} {title}: {shown(status)}", colour)))

    def permission(self, request: PermissionRequest, outcome: dict[str, Any], how: str) -> None:
        if outcome.get("outcome") == "selected":
            chosen = next(
                (
                    o.get("name", o.get("optionId"))
                    for o in request.options
                    if o.get("optionId") == outcome.get("optionId")
                ),
                outcome.get("optionId"),
            )
            decision = shown(chosen)
        else:
            decision = "cancelled"
        self._info(
            _text(("permission", "yellow"), f" {shown(request.title)}: {decision} ", (f"({how})", "dim"))
        )

    def cancelling(self, reason: str) -> None:
        self._cancel_started = time.monotonic()
        what = {"interrupt": "Ctrl-C", "timeout": "turn timeout"}.get(reason, reason)
        extra = " (Ctrl-C again to kill the agent)" if reason == "interrupt" else ""
        self._info(_text((f"cancelling the turn ({what}){extra}", "bold yellow")))

    def ladder_step(self, rung: Rung, elapsed: float) -> None:
        colour = "yellow" if rung in (Rung.SESSION_CANCEL, Rung.CANCEL_REQUEST) else "red"
        table = REMOTE_LADDER_TEXT if self._remote else LADDER_TEXT
        if self._protocol == 2 and rung in V2_LADDER_TEXT and not (self._remote and rung is Rung.TERMINATE):
            table = V2_LADDER_TEXT
        text = table[rung]
        self._info(_text((f"  → {text}", colour), " ", (f"(+{elapsed * 1000:.0f} ms)", "dim")))

    def result(self, result: TurnResult, waited: float = 0.0) -> None:
        """``waited``: the seconds of the turn spent waiting for the user to answer a question,
        said apart from the turn's own time."""
        self._hide_spinner()
        self._end_line(turn_over=True)
        if self.quiet:
            return
        res = result.resolution.value
        detail = f"stop reason {shown(result.stop_reason)}" if result.stop_reason else "no stop reason"
        if result.cancelled_by == "agent":
            detail += "; cancelled by the agent, nobody here asked"
        cancel = result.cancel
        if cancel is not None and cancel.resolved_by == "ignored":
            detail += "; the cancel did not take effect: the agent ended the turn on its own (it ignored it or finished first)"
        elif cancel is not None and cancel.resolved_by == "unreported":
            detail += "; the agent ended the work without saying why (an idle with no stop reason)"
        elif cancel is not None and cancel.resolved_by == "withdrawn":
            detail += "; the prompt was withdrawn before the agent ran it"
        elif cancel is not None and cancel.resolved_by in LADDER_EFFECT:
            effect = (REMOTE_LADDER_EFFECT if self._remote else LADDER_EFFECT)[cancel.resolved_by]
            detail += f"; cancelled by this host, {effect} took effect in {cancel.elapsed * 1000:.1f} ms"
        elif cancel is not None:
            detail += f"; cancel: {cancel.resolved_by}"
        colour = {"completed": "green", "cancelled": "yellow"}.get(res, "red")
        took = f"{max(result.elapsed - waited, 0.0):.2f} s"
        if waited > 0:
            took += f", plus {waited:.2f} s waiting for your answer"
        self.err.print(_text((f"turn {res}", colour), " ", (f"({detail}; {took})", "dim")))
        self._shown_count += 1

    def error(self, message: str) -> None:
        self._hide_spinner()
        self._end_line()
        self.err.print(_text(("error:", "bold red"), f" {shown(message, lines=True)}"))
        self._shown_count += 1

    def note(self, message: str) -> None:
        self._info(_text((shown(message, lines=True), "dim")))


def _text(*parts: str | tuple[str, str]) -> Text:
    """Styled text from plain strings: nothing in them is read as markup."""
    from rich.text import Text

    return Text.assemble(*parts)

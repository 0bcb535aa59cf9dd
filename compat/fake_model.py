"""A stand-in model server on loopback for the compatibility run: Anthropic-, Gemini- and
OpenAI-style (Responses and Chat Completions APIs) HTTP endpoints, streaming.

It is not a model: it looks at the last user message (its newest text) and answers with one of three scripts, so
that ``acp-driver check`` has something to cancel and something that asks permission:

- a message containing ``long essay``: text streamed slowly (``--busy-seconds``, default 30 s),
  so the turn stays busy while the audit cancels it;
- a message containing ``x.txt`` (and no tool result yet): a call of the agent's own shell tool
  (``touch x.txt``), which an agent in a mode that asks must ask permission for; on Chat
  Completions without a shell tool declared, a fenced ``shell`` block (``touch x.txt``), how an
  agent that parses tools from the text (gptme's ``markdown`` tool format) is called;
- anything else, including the agents' side requests (titles, summaries, checks): a short answer
  at once.

Every request is appended to ``--log`` (one JSON line: method, path, the chosen script).
Run: ``python fake_model.py --port 0`` prints ``PORT <n>`` once it listens.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BUSY_MARK = "long essay"
TOOL_MARK = "x.txt"

# Shell tools by name, and how each takes its command.
SHELL_TOOLS: dict[str, Any] = {
    "Bash": lambda: {"command": "touch x.txt", "description": "Create x.txt"},
    "run_shell_command": lambda: {"command": "touch x.txt", "description": "Create x.txt"},
    "shell": lambda: {"command": ["touch", "x.txt"]},
    "shell_command": lambda: {"command": "touch x.txt"},
    "execute": lambda: {"command": "touch x.txt"},
    "bash": lambda: {"command": "touch x.txt"},
    "exec_command": lambda: {
        "cmd": "touch x.txt",
        "sandbox_permissions": "require_escalated",
        "justification": "Create x.txt?",
    },
}


class Settings:
    busy_seconds = 30.0
    chunk_interval = 0.05
    log: str | None = None
    dump: str | None = None
    lock = threading.Lock()


def _texts(value: Any) -> list[str]:
    """Every string under a ``text`` key (or bare string content) in a message structure."""
    found: list[str] = []
    if isinstance(value, str):
        found.append(value)
    elif isinstance(value, list):
        for item in value:
            found.extend(_texts(item))
    elif isinstance(value, dict):
        for key in ("text", "content", "parts"):
            if key in value:
                found.extend(_texts(value[key]))
    return found


def _has_tool_result(value: Any) -> bool:
    text = json.dumps(value)
    return any(k in text for k in ('"tool_result"', '"functionResponse"', '"function_call_output"'))


def _tool_names(tools: Any) -> list[str]:
    names: list[str] = []
    for tool in tools or []:
        if not isinstance(tool, dict):
            continue
        if isinstance(tool.get("name"), str):
            names.append(tool["name"])
        for decl in tool.get("functionDeclarations") or tool.get("function_declarations") or []:
            if isinstance(decl, dict) and isinstance(decl.get("name"), str):
                names.append(decl["name"])
        function = tool.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


def _newest_text(value: Any) -> str:
    """The last text of a user message, what the user just asked: an agent may merge the prompts
    of several turns into one message (Claude Code, after a turn cancelled before any answer:
    the essay asked, "[Request interrupted by user]", then "Say hello.") or put its own context
    blocks (``<system-reminder>``) before the prompt."""
    texts = [t for t in _texts(value) if not t.lstrip().startswith("<system-reminder>")]
    return texts[-1] if texts else ""


def choose(last_user: Any, tools: Any) -> tuple[str, str | None]:
    """("busy" | "tool" | "quick", shell tool name), from the newest text of the last user message."""
    text = _newest_text(last_user)
    if TOOL_MARK in text and not _has_tool_result(last_user):
        shell = next((n for n in _tool_names(tools) if n in SHELL_TOOLS), None)
        if shell is not None:
            return "tool", shell
    if BUSY_MARK in text and not _has_tool_result(last_user):
        return "busy", None
    return "quick", None


def busy_words() -> Any:
    count = max(1, int(Settings.busy_seconds / Settings.chunk_interval))
    for i in range(count):
        time.sleep(Settings.chunk_interval)
        yield f"word{i} "


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _log(self, **fields: Any) -> None:
        if Settings.log is None:
            return
        with Settings.lock, open(Settings.log, "a") as f:
            f.write(json.dumps({"method": self.command, "path": self.path, **fields}) + "\n")

    def _json(self, body: Any, status: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse_start(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _event(self, data: Any, event: str | None = None) -> None:
        chunk = (f"event: {event}\n" if event else "") + f"data: {json.dumps(data)}\n\n"
        self.wfile.write(chunk.encode())
        self.wfile.flush()

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self._log(script="get")
        if "/models" in self.path:
            self._json({"object": "list", "data": [], "models": []})
        else:
            self._json({})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        if Settings.dump is not None:
            with Settings.lock, open(Settings.dump, "w") as f:
                json.dump(body, f)
        try:
            if "count_tokens" in self.path or ":countTokens" in self.path:
                self._log(script="count")
                self._json({"input_tokens": 10, "totalTokens": 10})
            elif self.path.split("?")[0].endswith("/messages"):
                self.anthropic(body)
            elif "generatecontent" in self.path.lower():
                self.gemini(body)
            elif self.path.split("?")[0].endswith("/responses"):
                self.openai_responses(body)
            elif self.path.split("?")[0].endswith("/chat/completions"):
                self.openai_chat(body)
            else:
                self._log(script="unknown")
                self._json({"error": {"message": f"no such endpoint {self.path}"}}, 404)
        except (BrokenPipeError, ConnectionResetError):
            self._log(script="client hung up")  # a cancelled turn closes its stream

    # ------------------------------------------------------------------ Anthropic

    def anthropic(self, body: dict[str, Any]) -> None:
        messages = body.get("messages") or [{}]
        user: dict[str, Any] = next((m for m in reversed(messages) if m.get("role") == "user"), {})
        script, tool = choose(user.get("content"), body.get("tools"))
        self._log(script=script, model=body.get("model"), stream=bool(body.get("stream")))
        model = body.get("model", "claude-fake")
        if not body.get("stream"):
            text = "hello" if script != "busy" else "a long essay"
            self._json(
                {
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 2},
                }
            )
            return
        self._sse_start()
        usage = {"input_tokens": 10, "output_tokens": 1}
        message = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        self._event({"type": "message_start", "message": message}, "message_start")
        stop = "end_turn"
        if script == "tool":
            assert tool is not None
            block = {"type": "tool_use", "id": "toolu_fake1", "name": tool, "input": {}}
            self._event(
                {"type": "content_block_start", "index": 0, "content_block": block}, "content_block_start"
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(SHELL_TOOLS[tool]())}
            self._event({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")
            stop = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            self._event(
                {"type": "content_block_start", "index": 0, "content_block": block}, "content_block_start"
            )
            words = busy_words() if script == "busy" else iter(["hello"])
            for word in words:
                delta = {"type": "text_delta", "text": word}
                self._event(
                    {"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta"
                )
        self._event({"type": "content_block_stop", "index": 0}, "content_block_stop")
        end = {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 5},
        }
        self._event(end, "message_delta")
        self._event({"type": "message_stop"}, "message_stop")

    # ------------------------------------------------------------------ Gemini

    def gemini(self, body: dict[str, Any]) -> None:
        contents = body.get("contents") or [{}]
        user: dict[str, Any] = next((c for c in reversed(contents) if c.get("role") == "user"), {})
        script, tool = choose(user.get("parts"), body.get("tools"))
        streaming = "streamgeneratecontent" in self.path.lower()
        self._log(script=script, stream=streaming)
        usage = {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12}

        def candidate(parts: list[Any], finish: str | None) -> dict[str, Any]:
            c: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
            if finish:
                c["finishReason"] = finish
            return {"candidates": [c], "usageMetadata": usage, "modelVersion": "gemini-fake"}

        if not streaming:
            # Side requests (e.g. "who speaks next") want JSON back; plain text is fine elsewhere.
            text = json.dumps({"reasoning": "done", "next_speaker": "user"})
            self._json(candidate([{"text": text}], "STOP"))
            return
        self._sse_start()
        if script == "tool":
            assert tool is not None
            self._event(candidate([{"functionCall": {"name": tool, "args": SHELL_TOOLS[tool]()}}], "STOP"))
            return
        words = busy_words() if script == "busy" else iter(["hello"])
        for word in words:
            self._event(candidate([{"text": word}], None))
        self._event(candidate([{"text": ""}], "STOP"))

    # ------------------------------------------------------------------ OpenAI Responses

    def openai_responses(self, body: dict[str, Any]) -> None:
        items = body.get("input") or []
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        last = items[-1] if items else {}
        user = next((i for i in reversed(items) if isinstance(i, dict) and i.get("role") == "user"), {})
        if isinstance(last, dict) and last.get("type") == "function_call_output":
            script, tool = "quick", None
        else:
            script, tool = choose(user.get("content"), body.get("tools"))
        self._log(script=script, model=body.get("model"), tools=_tool_names(body.get("tools")))
        self._sse_start()
        self._event({"type": "response.created", "response": {"id": "resp_fake"}}, "response.created")
        if script == "tool":
            assert tool is not None
            arguments = json.dumps(SHELL_TOOLS[tool]())
            item = {
                "type": "function_call",
                "id": "fc_fake",
                "call_id": "call_fake",
                "name": tool,
                "arguments": arguments,
            }
            self._event(
                {"type": "response.output_item.added", "output_index": 0, "item": item},
                "response.output_item.added",
            )
            self._event(
                {"type": "response.output_item.done", "output_index": 0, "item": item},
                "response.output_item.done",
            )
        else:
            added = {"type": "message", "id": "msg_fake", "role": "assistant", "content": []}
            self._event(
                {"type": "response.output_item.added", "output_index": 0, "item": added},
                "response.output_item.added",
            )
            words = busy_words() if script == "busy" else iter(["hello"])
            text = ""
            for word in words:
                text += word
                delta = {
                    "type": "response.output_text.delta",
                    "item_id": "msg_fake",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": word,
                }
                self._event(delta, "response.output_text.delta")
            done = {**added, "content": [{"type": "output_text", "text": text, "annotations": []}]}
            self._event(
                {"type": "response.output_item.done", "output_index": 0, "item": done},
                "response.output_item.done",
            )
        usage = {
            "input_tokens": 10,
            "input_tokens_details": None,
            "output_tokens": 2,
            "output_tokens_details": None,
            "total_tokens": 12,
        }
        self._event(
            {"type": "response.completed", "response": {"id": "resp_fake", "usage": usage}},
            "response.completed",
        )

    # ------------------------------------------------------------------ OpenAI Chat Completions

    def openai_chat(self, body: dict[str, Any]) -> None:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        user = messages[last] if last >= 0 else {}
        # An answer after the user's message (a tool's call, then its output): the tool ran.
        answered = any(m.get("role") in ("assistant", "tool") for m in messages[last + 1 :])
        script, tool = ("quick", None) if answered else choose(user.get("content"), body.get("tools"))
        block = (
            not answered
            and script == "quick"
            and TOOL_MARK in _newest_text(user.get("content"))
            and not body.get("tools")
        )
        if block:
            script = "tool block"
        self._log(script=script, model=body.get("model"), stream=bool(body.get("stream")))
        model = body.get("model", "fake")
        base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model}
        shell_block = "```shell\ntouch x.txt\n```\n"
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": shell_block if block else "hello"}
            if script == "tool":
                assert tool is not None
                message = {"role": "assistant", "content": None, "tool_calls": [self._chat_call(tool)]}
            choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if tool else "stop"}
            usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
            self._json({**base, "object": "chat.completion", "choices": [choice], "usage": usage})
            return
        self._sse_start()

        def chunk(delta: dict[str, Any], finish: str | None = None) -> None:
            self._event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

        chunk({"role": "assistant", "content": ""})
        if script == "tool":
            assert tool is not None
            chunk({"tool_calls": [{"index": 0, **self._chat_call(tool)}]})
            chunk({}, "tool_calls")
        else:
            # A word a line: gptme shows the model's text to the client a whole line at a time.
            lines = (f"{w.strip()}\n" for w in busy_words()) if script == "busy" else iter([])
            for line in shell_block.splitlines(keepends=True) if block else lines:
                chunk({"content": line})
            if script == "quick" and not block:
                chunk({"content": "hello"})
            chunk({}, "stop")
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
            self._event({**base, "choices": [], "usage": usage})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    @staticmethod
    def _chat_call(tool: str) -> dict[str, Any]:
        arguments = json.dumps(SHELL_TOOLS[tool]())
        return {"id": "call_fake", "type": "function", "function": {"name": tool, "arguments": arguments}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--busy-seconds", type=float, default=30.0)
    parser.add_argument("--log", default=None)
    parser.add_argument("--dump", default=None, help="write the last request body here (debugging)")
    opts = parser.parse_args()
    Settings.busy_seconds = opts.busy_seconds
    Settings.log = opts.log
    Settings.dump = opts.dump
    server = ThreadingHTTPServer(("127.0.0.1", opts.port), Handler)
    server.daemon_threads = True
    sys.stdout.write(f"PORT {server.server_address[1]}\n")
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()

"""What a trace never holds: credentials and environments. One rule for every output: the trace
file (``TraceRecorder``), a file read back (``read_trace``: the summary and the timeline page see
it redacted again, whoever wrote it) and the OpenTelemetry spans (``OtelSink``).

Rules, applied to every message before it goes anywhere (and to lifecycle fields, which carry
command lines and headers):

- authentication (``authenticate``, ``auth/login``, any ``auth/...``): the request's params keep
  only ``methodId``; its answer is replaced whole (a result by the marker, an error keeps only its
  numeric code) -- ``Redactor`` remembers the ids of these requests to know their answers;
- a value under a key that names a secret is replaced, at any depth (strings; booleans and null
  stay, so do the numbers of a ``...token...`` key: ``inputTokens: 120``). A key names a secret
  when it holds ``authorization``, ``token``, ``secret``, ``password``/``passwd``,
  ``passphrase``, ``cookie``, ``credential``, ``jwt``, ``apiKey``, ``accessKey``,
  ``sessionKey``, ``privateKey``... or ends with the word ``auth``, ``pass`` or ``pwd``
  (``auth``, ``basicAuth``, ``DB_PASS``, ``user-pwd``; not ``authMethods``), in any case, with
  ``_``, ``-`` or nothing between the words;
- environments (``env``, ``environment``) and ``headers`` keep their names, never their values;
- a command line (a list under ``args``, ``argv``, ``agent``, ``command``, ``cmd``): the word
  after an option naming a secret (``--password X``) and the value of ``NAME=value`` words whose
  name does (``--api-key=X``, ``GITHUB_TOKEN=X``);
- any text, anywhere: the token after ``Bearer``/``Basic`` (any case); the password of a URL
  (``ws://user:PASSWORD@host``; a URL's user alone, which may be a token, goes whole); the value
  after a name naming a secret followed by ``=`` or ``:`` (``password=X``, ``token: X``,
  ``?api_key=X``), or after such an option and a space (``mysql --password X``).

A cheap test comes first: a message whose lowered text has none of the words these rules look
for (most of a stream's updates) is not walked at all. The test is a superset of the rules: a
JSON escape (``\\u``) anywhere in the text, which could spell any word, walks the message too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import orjson

REDACTED = "[redacted]"

_SECRET_NAME = re.compile(
    r"(?i:authori[sz]|token|secret|passw(?:or)?d|passphrase|cookie|credential|jwt"
    r"|(?:api|access|session|private|secret|signing|client)[_-]?key)"
    r"|(?:^|[_\-.\s])(?i:auth|pass|pwd)$|(?<=[a-z0-9])(?:Auth|AUTH|Pass|PASS|Pwd|PWD)$"
)
"""A name (a key, an option, a variable) that names a secret (see the module docstring)."""

_WORDS = (
    *(b"auth", b"token", b"pass", b"pwd", b"secret", b"key", b"jwt", b"cookie", b"credential"),
    *(b"bearer", b"basic", b"\\u"),
    *(b'"env', b'"headers"'),
)
"""Any of these bytes in a message's lowered text: it is walked (otherwise kept as it is). Each
name rule's words, the text rules' (a URL's userinfo: ``@`` and ``://``, below), a JSON escape
(which could spell any of them), and the keys of environments and headers (``"env"``,
``"environment"``, ``"headers"``: they reach ``_names_only``)."""

_TEXT_HINT = re.compile(r"(?i)bearer|basic|://|[=:]|(?<![\w-])-")
"""A string without any of these holds nothing the text rules change."""
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^/\s@:\"']*)(:[^/\s@\"']*)?@")
_NAME_SEP = re.compile(
    r"(?<![\w-])(?:(--?[A-Za-z][\w.-]*)(?:=|[ \t]+)|([A-Za-z_][\w.-]*)[\"']?[ \t]*[:=](?!//)[ \t]*)"
)
_VALUE = re.compile(r"\"[^\"]*\"|'[^']*'|(?:(?i:bearer|basic|token|digest)[ \t]+)?[^\s\"',;&]+")
"""``--name value``, ``--name=value``, ``name=value``, ``name: value``, ``"name": "value"``: the
value (which may start with its scheme: ``Authorization: Bearer X``) is redacted when the name
names a secret."""


def is_auth_method(method: object) -> bool:
    """``authenticate``, ``auth/login``, ``auth/logout``...: requests whose params are credentials."""
    return isinstance(method, str) and (method == "authenticate" or method.startswith("auth/"))


def is_secret_name(name: str) -> bool:
    """Whether a key, an option or a variable's name names a secret (see the module docstring)."""
    return _SECRET_NAME.search(name) is not None


def needs_scan(data: bytes) -> bool:
    """Whether a message's text may hold something to redact."""
    lowered = data.lower()  # and substrings: several times faster than a regular expression
    if any(map(lowered.__contains__, _WORDS)):
        return True
    return b"@" in lowered and (b"://" in lowered or b":\\/\\/" in lowered)


def wire_key(rid: Any) -> Any:
    """A request id as a dict key: an id that is not a string or a number (an object, an array:
    a peer's mistake) is keyed by its JSON text."""
    if rid is None or isinstance(rid, (str, int, float)):
        return rid
    return orjson.dumps(rid, option=orjson.OPT_SORT_KEYS).decode()


class Redactor:
    """The rules with the one thing they remember: the ids of authentication requests, per
    direction, so that their answers are replaced whole."""

    __slots__ = ("_asked", "pending")

    def __init__(self) -> None:
        self._asked: dict[str, set[Any]] = {"in": set(), "out": set()}
        self.pending = False
        """Authentication requests not answered yet: while there are some, every message is
        walked (an answer need not carry any word ``needs_scan`` looks for)."""

    def wire(self, direction: str, data: bytes, message: Any) -> Any:
        """``message`` (parsed from ``data``) redacted, or itself when nothing needs to change."""
        if self.pending or needs_scan(data):
            return self.message(direction, message)
        return message

    def message(self, direction: str, message: Any) -> Any:
        """A copy of a JSON-RPC message (or batch) with secrets replaced."""
        if isinstance(message, list):
            return [self.message(direction, item) for item in message]
        if isinstance(message, dict) and "id" in message:
            method = message.get("method")
            key = wire_key(message["id"])
            if is_auth_method(method):
                self._asked[direction].add(key)
                self.pending = True
            elif method is None:
                asked = self._asked["out" if direction == "in" else "in"]
                if key in asked:
                    asked.discard(key)
                    self.pending = bool(self._asked["in"] or self._asked["out"])
                    return _auth_answer(message)
        return redact_message(message)

    def event(self, event: dict[str, Any]) -> dict[str, Any]:
        """A trace file's event (read back) redacted: a message, a line that was not JSON, or a
        lifecycle event's fields."""
        if event.get("kind") == "wire":
            out = dict(event)
            if "msg" in event:
                out["msg"] = self.message(str(event.get("dir")), event["msg"])
            if isinstance(event.get("raw"), str):
                out["raw"] = redact_text(event["raw"])
            return out
        return redact_fields(event)


def redact_message(message: Any) -> Any:
    """A copy of a JSON-RPC message (or batch) with secrets replaced (an answer to an
    authentication request is known by its id only: ``Redactor`` remembers those)."""
    if isinstance(message, list):
        return [redact_message(item) for item in message]
    if not isinstance(message, dict):
        return redact_value(message)
    out = redact_value(message)
    if is_auth_method(message.get("method")) and isinstance(message.get("params"), dict):
        params = message["params"]
        kept = {"methodId": redact_value(params["methodId"])} if "methodId" in params else {}
        out["params"] = {**kept, **{k: REDACTED for k in params if k != "methodId"}}
    return out


def _auth_answer(message: dict[str, Any]) -> dict[str, Any]:
    """The answer to an authentication request: only ``jsonrpc``, ``id`` and an error's code."""
    out: dict[str, Any] = {}
    for key, value in message.items():
        if key in ("jsonrpc", "id"):
            out[key] = redact_value(value)
        elif key == "error" and isinstance(value, dict):
            code = value.get("code")
            out[key] = {"code": code if type(code) is int else None, "message": REDACTED}
        else:
            out[key] = REDACTED
    return out


def redact_value(value: Any) -> Any:
    """``value`` with secret-named keys, environments, headers, command lines and the secrets in
    its text replaced (see the module docstring)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                out[key] = redact_value(item)
            elif _SECRET_NAME.search(key):
                out[key] = _scrub(key, item)
            elif key in ("env", "environment", "headers"):
                out[key] = _names_only(item)
            elif key in ("args", "argv", "agent", "command", "cmd") and isinstance(item, list):
                out[key] = redact_argv(item)
            else:
                out[key] = redact_value(item)
        return out
    if isinstance(value, list):
        return [redact_value(item) for item in value]
    return value


def redact_text(text: str) -> str:
    """``text`` with the tokens, URL passwords and secret-named values in it replaced."""
    if _TEXT_HINT.search(text) is None:
        return text
    text = _assignments(text)
    text = _USERINFO.sub(_userinfo, text)
    return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)


def _assignments(text: str) -> str:
    """The values after secret names (``_NAME_SEP``) replaced; a name's value that is not
    redacted is still searched for names (``url=http://h?token=X``)."""
    parts: list[str] = []
    done = 0
    for match in _NAME_SEP.finditer(text):
        if match.start() < done or not _SECRET_NAME.search(match.group(1) or match.group(2)):
            continue
        value = _VALUE.match(text, match.end())
        if value is None:
            continue
        quote = value.group()[0] if value.group()[0] in "\"'" else ""
        if value.group() == f"{quote}{REDACTED}{quote}":
            continue
        parts += (text[done : match.end()], f"{quote}{REDACTED}{quote}")
        done = value.end()
    if not parts:
        return text
    parts.append(text[done:])
    return "".join(parts)


def _userinfo(match: re.Match[str]) -> str:
    scheme, user, password = match.group(1), match.group(2), match.group(3)
    if password is None:
        return f"{scheme}{REDACTED}@" if user else match.group(0)  # a user alone may be a token
    return f"{scheme}{user}:{REDACTED}@"


def _scrub(key: str, value: Any) -> Any:
    """The value of a secret-named key: every string goes; booleans and null stay (``auth:
    {terminal: false}``), and numbers under a ``...token...`` key (``inputTokens: 120``)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value if "token" in key.lower() else REDACTED
    if isinstance(value, dict):
        return {k: _scrub(k if isinstance(k, str) else key, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(key, item) for item in value]
    return REDACTED


def _names_only(value: Any) -> Any:
    """An environment or a header list: the names stay, every value goes."""
    if isinstance(value, list):
        return [
            {**{k: redact_value(v) for k, v in item.items() if k == "name"}, "value": REDACTED}
            if isinstance(item, dict)
            else _name_of(item)
            if isinstance(item, str)
            else REDACTED
            for item in value
        ]
    if isinstance(value, dict):
        return {redact_value(key): REDACTED for key in value}
    return REDACTED if value is not None else None


def _name_of(item: str) -> str:
    """One entry of an environment or a header list written as text: ``NAME=value`` and
    ``Name: value`` keep the name; a name alone (a header's, read back) stays."""
    for sep in ("=", ":"):
        name, found, _value = item.partition(sep)
        if found:
            return f"{redact_text(name)}{sep}{REDACTED}"
    return redact_text(item)


_WORD_NAME = re.compile(r"-{0,2}[A-Za-z_][\w.-]*")


def redact_argv(argv: Sequence[Any]) -> list[Any]:
    """A command line with the values of secret-named options and ``NAME=value`` words replaced
    (and the text rules applied to every other word)."""
    out: list[Any] = []
    hide_next = False
    for word in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if not isinstance(word, str):
            out.append(redact_value(word))
            continue
        name, eq, _value = word.partition("=")
        if eq and _WORD_NAME.fullmatch(name) and _SECRET_NAME.search(name):
            out.append(f"{name}={REDACTED}")
        elif not eq and word.startswith("-") and _SECRET_NAME.search(word):
            out.append(word)
            hide_next = True
        else:
            out.append(redact_text(word))
    return out


def redact_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """A lifecycle event's fields: command lines (``argv``, ``agent``) keep no secret option's
    value; headers (a mapping) keep their names; the rest as ``redact_value``."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        if key == "headers" and isinstance(value, dict):
            out[key] = sorted(str(redact_value(name)) for name in value)
        else:
            out[key] = redact_value({key: value})[key]
    return out

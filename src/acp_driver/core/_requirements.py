"""The members a client's params must have, per protocol version, as that version's schema says.

Each table is the ``required`` list of the params type of every method an agent serves (with
the required members every variant of a union shares, e.g. ``value`` of
``session/set_config_option``), and of every content block type a prompt may carry, each with
its JSON type (``any``: the variants differ). A test per version reads that version's
``schema.json`` and keeps its table equal to it. Pure data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from .. import protocol as p

Members = tuple[tuple[str, str], ...]
"""``((member, JSON type), ...)``: ``string``, ``integer``, ``array``, ``object`` or ``any``."""


@dataclass(frozen=True)
class Requirements:
    """What one version's schema requires of the params a client sends an agent."""

    methods: Mapping[str, Members]
    """method -> the required members of its params."""
    content_blocks: Mapping[str, Members]
    """content block ``type`` -> its required members besides ``type``."""


_CONTENT_BLOCKS: Mapping[str, Members] = MappingProxyType(
    {
        "text": (("text", "string"),),
        "image": (("data", "string"), ("mimeType", "string")),
        "audio": (("data", "string"), ("mimeType", "string")),
        "resource_link": (("name", "string"), ("uri", "string")),
        "resource": (("resource", "object"),),
    }
)
"""The same in v1 and v2."""

V1_REQUIREMENTS = Requirements(
    methods=MappingProxyType(
        {
            p.INITIALIZE: (("protocolVersion", "integer"),),
            p.AUTHENTICATE: (("methodId", "string"),),
            p.LOGOUT: (),
            p.SESSION_NEW: (("cwd", "string"), ("mcpServers", "array")),
            p.SESSION_LOAD: (("mcpServers", "array"), ("cwd", "string"), ("sessionId", "string")),
            p.SESSION_LIST: (),
            p.SESSION_DELETE: (("sessionId", "string"),),
            p.SESSION_RESUME: (("sessionId", "string"), ("cwd", "string")),
            p.SESSION_CLOSE: (("sessionId", "string"),),
            p.SESSION_SET_MODE: (("sessionId", "string"), ("modeId", "string")),
            p.SESSION_SET_CONFIG_OPTION: (("sessionId", "string"), ("configId", "string"), ("value", "any")),
            p.SESSION_PROMPT: (("sessionId", "string"), ("prompt", "array")),
            p.SESSION_CANCEL: (("sessionId", "string"),),
        }
    ),
    content_blocks=_CONTENT_BLOCKS,
)

V2_REQUIREMENTS = Requirements(
    methods=MappingProxyType(
        {
            p.INITIALIZE: (("protocolVersion", "integer"), ("info", "object")),
            p.AUTH_LOGIN: (("methodId", "string"),),
            p.AUTH_LOGOUT: (),
            p.SESSION_NEW: (("cwd", "string"),),
            p.SESSION_LIST: (),
            p.SESSION_DELETE: (("sessionId", "string"),),
            p.SESSION_RESUME: (("sessionId", "string"), ("cwd", "string")),
            p.SESSION_CLOSE: (("sessionId", "string"),),
            p.TOOL_CALL_CANCEL: (("sessionId", "string"), ("toolCallId", "string")),
            p.TERMINAL_CANCEL: (("sessionId", "string"), ("terminalId", "string")),
            p.SESSION_SET_CONFIG_OPTION: (
                ("sessionId", "string"),
                ("configId", "string"),
                ("type", "string"),
                ("value", "any"),
            ),
            p.SESSION_PROMPT: (("sessionId", "string"), ("prompt", "array")),
            p.SESSION_CANCEL: (("sessionId", "string"),),
        }
    ),
    content_blocks=_CONTENT_BLOCKS,
)

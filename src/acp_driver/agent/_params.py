"""The required shape of the params of every method the agent runtime serves, checked cheaply.

``REQUIRED`` mirrors the ``required`` members of the ACP schema's request types (a test keeps
the two in step): for each method, the members that must be present and the JSON type each
must have. ``check_params`` is one dict lookup and a type check per required member -- no
schema engine on the hot path. A request that breaks it is answered ``-32602`` with the reason
before any agent code runs. (Optional members are checked where they are used.)
"""

from __future__ import annotations

from typing import Any, Final

from .. import protocol as p
from ..core import RpcError

_JSON_TYPES: Final[dict[str, tuple[type, ...]]] = {
    "string": (str,),
    "integer": (int,),
    "array": (list,),
    "object": (dict,),
}

REQUIRED: Final[dict[str, tuple[tuple[str, str], ...]]] = {
    p.INITIALIZE: (("protocolVersion", "integer"),),
    p.AUTHENTICATE: (("methodId", "string"),),
    p.SESSION_NEW: (("cwd", "string"), ("mcpServers", "array")),
    p.SESSION_LOAD: (("sessionId", "string"), ("cwd", "string"), ("mcpServers", "array")),
    p.SESSION_RESUME: (("sessionId", "string"), ("cwd", "string")),
    p.SESSION_LIST: (),
    p.SESSION_CLOSE: (("sessionId", "string"),),
    p.SESSION_SET_MODE: (("sessionId", "string"), ("modeId", "string")),
    p.SESSION_SET_CONFIG_OPTION: (("sessionId", "string"), ("configId", "string"), ("value", "any")),
    p.SESSION_PROMPT: (("sessionId", "string"), ("prompt", "array")),
    p.SESSION_CANCEL: (("sessionId", "string"),),
}
"""method -> ((member, JSON type), ...), from the schema's ``required`` lists."""


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    for name, types in _JSON_TYPES.items():
        if isinstance(value, types):
            return name
    return "number" if isinstance(value, float) else type(value).__name__


def params_problem(method: str, params: Any) -> str | None:
    """Why ``params`` do not have the required shape of ``method`` (None: they do)."""
    required = REQUIRED.get(method)
    if required is None:
        return None
    if type(params) is not dict:
        if params is None and not required:
            return None
        return f"{method} params must be an object, got {_json_type(params)}"
    for member, json_type in required:
        value = params.get(member, _MISSING)
        if value is _MISSING:
            return f'{method}: missing required member "{member}"'
        if json_type != "any" and type(value) not in _JSON_TYPES[json_type]:  # a bool is no integer
            return f'{method}: "{member}" must be {_article(json_type)}, got {_json_type(value)}'
    if method == p.SESSION_PROMPT:
        for i, block in enumerate(params["prompt"]):
            if type(block) is not dict or type(block.get("type")) is not str:
                return f'{method}: prompt[{i}] must be a content block (an object with a string "type")'
    return None


def check_params(method: str, params: Any) -> dict[str, Any]:
    """``params`` as an object, or ``RpcError`` ``-32602`` naming what is wrong."""
    problem = params_problem(method, params)
    if problem is not None:
        raise RpcError.invalid_params(problem)
    return params if type(params) is dict else {}


def _article(json_type: str) -> str:
    return f"an {json_type}" if json_type[0] in "aeiou" else f"a {json_type}"


_MISSING: Any = object()

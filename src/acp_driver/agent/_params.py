"""The required shape of the params of every method the agent runtime serves, checked cheaply.

What is required comes from the protocol version the connection speaks
(``ProtocolProfile.requirements``, one table per version from that version's schema): for each
method, the members that must be present and the JSON type each must have, and for each content
block of a prompt, the members its ``type`` requires. ``check_params`` is one dict lookup and a
type check per required member -- no schema engine on the hot path. A request that breaks it is
answered ``-32602`` with the reason before any agent code runs. (Optional members are checked
where they are used.)
"""

from __future__ import annotations

from typing import Any, Final

from .. import protocol as p
from ..core import ProtocolProfile, RpcError

_JSON_TYPES: Final[dict[str, tuple[type, ...]]] = {
    "string": (str,),
    "integer": (int,),
    "array": (list,),
    "object": (dict,),
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    for name, types in _JSON_TYPES.items():
        if isinstance(value, types):
            return name
    return "number" if isinstance(value, float) else type(value).__name__


def params_problem(profile: ProtocolProfile, method: str, params: Any) -> str | None:
    """Why ``params`` do not have the shape ``profile``'s schema requires of ``method`` (None:
    they do)."""
    required = profile.requirements.methods.get(method)
    if required is None:
        return None
    if type(params) is not dict:
        if params is None and not required:
            return None
        return f"{method} params must be an object, got {_json_type(params)}"
    problem = _members_problem(method, params, required)
    if problem is None and method == p.SESSION_PROMPT:
        blocks = profile.requirements.content_blocks
        for i, block in enumerate(params["prompt"]):
            if type(block) is not dict or type(kind := block.get("type")) is not str:
                return f'{method}: prompt[{i}] must be a content block (an object with a string "type")'
            members = blocks.get(kind)  # a type the schema does not know: the agent's to judge
            if members is not None:
                problem = _members_problem(f"{method}: prompt[{i}] ({kind})", block, members)
                if problem is not None:
                    return problem
    return problem


def _members_problem(what: str, value: dict[str, Any], required: tuple[tuple[str, str], ...]) -> str | None:
    for member, json_type in required:
        found = value.get(member, _MISSING)
        if found is _MISSING:
            return f'{what}: missing required member "{member}"'
        if json_type != "any" and type(found) not in _JSON_TYPES[json_type]:  # a bool is no integer
            return f'{what}: "{member}" must be {_article(json_type)}, got {_json_type(found)}'
    return None


def check_params(profile: ProtocolProfile, method: str, params: Any) -> dict[str, Any]:
    """``params`` as an object, or ``RpcError`` ``-32602`` naming what is wrong."""
    problem = params_problem(profile, method, params)
    if problem is not None:
        raise RpcError.invalid_params(problem)
    return params if type(params) is dict else {}


def _article(json_type: str) -> str:
    return f"an {json_type}" if json_type[0] in "aeiou" else f"a {json_type}"


_MISSING: Any = object()

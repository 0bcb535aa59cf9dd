"""Which ACP version a connection speaks, decided once for every client we have (the host
driver, ``check``, ``serve``'s relay and the proxy).

The rule, by what the agent *does* rather than only by the number it sends back (many v1
agents answer ``initialize`` with the client's own ``protocolVersion``: an echo, not a claim):

1. ``initialize`` goes out asking for the newest version (``auto``), with both versions' field
   names so that a v1 agent can read it (``initialize_params``), or for the one insisted on.
2. A refusal ``-32022`` naming the versions the agent speaks is answered by asking again for
   the newest of them we speak (``retry_version``).
3. The answer (``read_answer``): its ``protocolVersion`` is taken, unless it claims 2 while its
   shape is v1's (``agentCapabilities``/``agentInfo`` and neither ``capabilities`` nor
   ``info``): then the agent speaks v1 (``Negotiated.note`` says so, for one stderr line).
4. Later, a v2 ``session/prompt`` answered the v1 way (a ``stopReason`` and no ``messageId``)
   says the same (``answers_like_v1``): the host speaks v1 from then on.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ._profile import LATEST, PROFILES, V1, V2, ProtocolProfile

Wanted = Literal["auto", 1, 2]
"""What a client asks for: ``auto`` (the newest the agent speaks), or insist on 1 or 2."""

ECHO_NOTE = "agent claims v2 but answers v1: speaking v1"


class NegotiationError(Exception):
    """The agent's ``initialize`` answer leaves no version both sides speak (the message says why)."""


@dataclass(frozen=True)
class Negotiated:
    """The version spoken, and what the ``initialize`` answer said in that version's names."""

    profile: ProtocolProfile
    info: dict[str, Any] = field(default_factory=dict)
    capabilities: dict[str, Any] = field(default_factory=dict)
    auth_methods: list[dict[str, Any]] = field(default_factory=list)
    note: str | None = None
    """Set when the version spoken is not the one the agent claimed (``ECHO_NOTE``)."""


def first_version(wanted: Wanted) -> int:
    """The version the first ``initialize`` asks for."""
    return LATEST if wanted == "auto" else wanted


def initialize_params(
    version: int,
    *,
    both: bool,
    info: Mapping[str, Any],
    capabilities: Mapping[int, Mapping[str, Any]],
) -> dict[str, Any]:
    """``initialize``'s params asking for ``version``: that version's field names, and with
    ``both`` (``auto``) every version's, so that an older agent finds its own (each version's
    parser ignores the other's names). ``capabilities``: the client's, by version."""
    params: dict[str, Any] = {"protocolVersion": version}
    for profile in PROFILES.values() if both else (PROFILES[version],):
        if profile.version > version:
            continue
        params[profile.client_info_field] = dict(info)
        params[profile.client_capabilities_field] = dict(capabilities.get(profile.version, {}))
    return params


def retry_version(wanted: Wanted, code: int, data: Any, refusal_code: int) -> int | None:
    """After an ``initialize`` error: the version to ask for again (``auto`` only, after the
    refusal ``refusal_code`` naming the versions the agent speaks), or None (the error stands).
    ``NegotiationError`` when the agent speaks none of ours."""
    supported = data.get("supported") if isinstance(data, dict) else None
    if wanted != "auto" or code != refusal_code or not isinstance(supported, list):
        return None
    spoken = sorted(v for v in supported if type(v) is int and v in PROFILES)
    if not spoken:
        raise NegotiationError(
            f"agent speaks ACP protocol versions {supported!r}; acp-driver speaks "
            + ", ".join(str(v) for v in sorted(PROFILES))
        )
    return spoken[-1]


def read_answer(wanted: Wanted, answer: Any) -> Negotiated:
    """The version an ``initialize`` answer settles (see the module docstring)."""
    if not isinstance(answer, dict):
        raise NegotiationError(f"invalid initialize response: {answer!r}")
    version = answer.get("protocolVersion")
    profile = PROFILES.get(version) if type(version) is int else None
    note = None
    if profile is V2 and _shaped_like(V1, answer) and not _shaped_like(V2, answer):
        profile, note = V1, ECHO_NOTE
    if profile is None or (wanted != "auto" and profile.version != wanted):
        asked = ", ".join(str(v) for v in sorted(PROFILES)) if wanted == "auto" else str(wanted)
        shown = repr(version) if note is None else f"{version!r} (answered the v1 way)"
        raise NegotiationError(f"agent speaks ACP protocol version {shown}; acp-driver asked for {asked}")
    info = answer.get(profile.info_field)
    caps = answer.get(profile.capabilities_field)
    methods = answer.get("authMethods")
    return Negotiated(
        profile,
        info if isinstance(info, dict) else {},
        caps if isinstance(caps, dict) else {},
        [m for m in methods if isinstance(m, dict)] if isinstance(methods, list) else [],
        note,
    )


def _shaped_like(profile: ProtocolProfile, answer: Mapping[str, Any]) -> bool:
    return profile.info_field in answer or profile.capabilities_field in answer


def answers_like_v1(profile: ProtocolProfile, prompt_answer: Any) -> bool:
    """Whether a ``session/prompt`` answer on a connection speaking ``profile`` is v1's shape
    although v2 was agreed (a stop reason, no ``messageId``): the agent speaks v1."""
    return (
        profile is V2
        and isinstance(prompt_answer, dict)
        and "messageId" not in prompt_answer
        and isinstance(prompt_answer.get("stopReason"), str)
    )

"""The mutation table, one module per area (see ``tools/mutations.py``)."""

from __future__ import annotations

from ._base import Mutation
from .agent import MUTATIONS as AGENT
from .aio import MUTATIONS as AIO
from .check import MUTATIONS as CHECK
from .cli import MUTATIONS as CLI
from .core import MUTATIONS as CORE
from .driver import MUTATIONS as DRIVER
from .other import MUTATIONS as OTHER
from .proxy import MUTATIONS as PROXY
from .redaction import MUTATIONS as REDACTION
from .remote import MUTATIONS as REMOTE
from .v2 import MUTATIONS as V2

MUTATIONS: list[Mutation] = [
    *CORE,
    *AIO,
    *DRIVER,
    *AGENT,
    *V2,
    *REMOTE,
    *PROXY,
    *CLI,
    *CHECK,
    *OTHER,
    *REDACTION,
]

__all__ = ["MUTATIONS", "Mutation"]

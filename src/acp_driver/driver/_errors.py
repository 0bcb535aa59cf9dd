"""The host driver's errors (the rest are the core's: ``RpcError`` and its subclasses)."""

from __future__ import annotations

from ..core import AcpError, ConnectionClosedError


class AgentStartError(AcpError):
    """The agent could not be started or did not complete ``initialize``."""

    @staticmethod
    def spawn_reason(argv0: str, exc: OSError, path: str | None) -> str:
        """Why ``argv0`` could not be started (``exc``), in a few words. A bare command name that no
        directory of ``path`` (the agent's environment's ``PATH``) holds is said as such: "No
        such file or directory" alone reads as a missing file, while the usual cause is an
        environment not activated (a venv whose ``bin`` is not on ``PATH``)."""
        what = exc.strerror or str(exc)
        if exc.filename is not None and str(exc.filename) != argv0:
            what += f": {exc.filename}"  # e.g. the cwd does not exist
        elif isinstance(exc, FileNotFoundError) and "/" not in argv0:
            what = (
                f"no {argv0!r} on PATH{' (PATH is empty)' if not path else ''}; give the command's full "
                "path, or put its directory on PATH (a virtual environment's bin/ is there only when "
                "it is activated)"
            )
        return what


class AgentExitedError(ConnectionClosedError):
    """The agent process ended (or closed its output) while we still needed it."""


class AgentDisconnectedError(AgentExitedError):
    """The connection to a remote agent ended (the server or the network dropped it, or the
    host closed it) while we still needed it; the message names the URL and what happened."""

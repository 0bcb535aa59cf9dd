"""How to add an extra to this copy of acp-driver, the way it was installed (shared by the CLI
and the proxy: the package is on no index, so ``pip install 'acp-driver[remote]'`` would fail)."""

from __future__ import annotations

import json
import shlex
import sys
from urllib.parse import unquote, urlsplit

__all__ = ["DISTRIBUTION", "install_extra"]

DISTRIBUTION = "acp-driver"


def install_extra(extra: str) -> str:
    """The command that adds ``extra`` to this copy of acp-driver, the way it was installed.

    The package is not on a package index: ``pip install 'acp-driver[remote]'`` would fail. What
    pip recorded (``direct_url.json``, PEP 610) says where this copy came from: a checkout
    installed editable (``pip install -e .``) gets ``pip install -e '/its/path[remote]'``, any
    other local directory, archive or VCS URL ``pip install 'acp-driver[remote] @ URL'``. pip is
    run by this interpreter (``python -m pip``): right whether or not its environment is activated.
    """
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        recorded = distribution(DISTRIBUTION).read_text("direct_url.json")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return f"{pip} -e '.[{extra}]' (from the project's checkout)"
    origin: dict[str, object] = {}
    if recorded:
        try:
            loaded = json.loads(recorded)
        except ValueError:
            loaded = None
        origin = loaded if isinstance(loaded, dict) else {}
    url = origin.get("url")
    if not isinstance(url, str) or not url:
        return f"{pip} {shlex.quote(f'{DISTRIBUTION}[{extra}]')}"
    dir_info = origin.get("dir_info")
    if url.startswith("file://") and isinstance(dir_info, dict) and dir_info.get("editable"):
        return f"{pip} -e {shlex.quote(f'{unquote(urlsplit(url).path)}[{extra}]')}"
    vcs = origin.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("vcs"), str):
        url = f"{vcs['vcs']}+{url}"
    return f"{pip} {shlex.quote(f'{DISTRIBUTION}[{extra}] @ {url}')}"

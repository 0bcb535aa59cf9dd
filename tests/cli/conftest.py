"""The CLI's tests are about v1 (their expectations name v1's messages): every ``acp-driver``
they start speaks v1 (``ACP_DRIVER_PROTOCOL=1``), except where a test asks for v2 itself
(``test_v2_cli.py``)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _speak_v1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACP_DRIVER_PROTOCOL", "1")

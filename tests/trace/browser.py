"""A headless Chromium driven over the Chrome DevTools protocol (CDP), for the timeline page's tests.

Chromium comes from the distribution's packages (Debian ``chromium``; ``.ci/run`` installs it);
where it is absent the tests that need it skip loudly, or fail with ``ACP_BROWSER_REQUIRED=1``
(set by CI). The protocol is spoken with ``websockets`` (a test dependency already): a browser
started here with a fresh profile and no network services, one page, its console errors,
uncaught exceptions and network requests collected, and ``close`` ending the process we started.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import os
import shutil
import struct
import tempfile
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
)


def chromium_or_skip() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and os.path.exists("/usr/bin/chromium"):
        found = "/usr/bin/chromium"
    if found is None:
        reason = "no chromium on this machine (Debian: apt-get install chromium)"
        if os.environ.get("ACP_BROWSER_REQUIRED") == "1":
            pytest.fail(reason + " and ACP_BROWSER_REQUIRED=1", pytrace=False)
        pytest.skip(reason)
    return found


class Browser:
    """One headless Chromium process and one page in it."""

    def __init__(self, process: asyncio.subprocess.Process, profile: str) -> None:
        self.process = process
        self.profile = profile
        self._ws: Any = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._listeners: list[tuple[str, asyncio.Future[dict[str, Any]]]] = []
        self._reader: asyncio.Task[None] | None = None
        self.session: str | None = None
        self.console_errors: list[str] = []
        self.requests: list[str] = []

    @classmethod
    async def start(cls, binary: str) -> Browser:
        profile = tempfile.mkdtemp(prefix="acp-trace-chromium-")
        process = await asyncio.create_subprocess_exec(
            binary,
            *FLAGS,
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            "about:blank",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        browser = cls(process, profile)
        try:
            url = await browser._devtools_url()
            await browser._connect(url)
        except BaseException:
            await browser.close()
            raise
        return browser

    async def _devtools_url(self) -> str:
        assert self.process.stderr is not None
        seen = []
        async with asyncio.timeout(60):
            while True:
                line = await self.process.stderr.readline()
                if not line:
                    raise RuntimeError(
                        "chromium exited before it listened: " + b"".join(seen).decode(errors="replace")
                    )
                seen.append(line)
                text = line.decode(errors="replace").strip()
                if text.startswith("DevTools listening on "):
                    asyncio.get_running_loop().create_task(self._drain_stderr())
                    return text.removeprefix("DevTools listening on ")

    async def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        with contextlib.suppress(Exception):
            while await self.process.stderr.read(65536):
                pass

    async def _connect(self, url: str) -> None:
        import websockets

        self._ws = await websockets.connect(url, max_size=256 * 1024 * 1024)
        self._reader = asyncio.get_running_loop().create_task(self._read())
        target = await self.send("Target.createTarget", {"url": "about:blank"}, browser=True)
        attached = await self.send(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}, browser=True
        )
        self.session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            await self.send(f"{domain}.enable")

    async def _read(self) -> None:
        async for raw in self._ws:
            message = orjson.loads(raw)
            if "id" in message:
                fut = self._waiting.pop(message["id"], None)
                if fut is not None and not fut.done():
                    if "error" in message:
                        fut.set_exception(RuntimeError(f"CDP error: {message['error']}"))
                    else:
                        fut.set_result(message.get("result", {}))
                continue
            self._event(message.get("method", ""), message.get("params", {}))

    def _event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
            args = params.get("args", [])
            self.console_errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in args))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.console_errors.append(str(details.get("exception", {}).get("description") or details))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
            self.console_errors.append(str(params["entry"].get("text")))
        elif method == "Network.requestWillBeSent":
            self.requests.append(str(params.get("request", {}).get("url")))
        for name, fut in list(self._listeners):
            if name == method and not fut.done():
                fut.set_result(params)
                self._listeners.remove((name, fut))

    async def send(self, method: str, params: dict[str, Any] | None = None, *, browser: bool = False) -> Any:
        rid = next(self._ids)
        message: dict[str, Any] = {"id": rid, "method": method, "params": params or {}}
        if not browser:
            message["sessionId"] = self.session
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        await self._ws.send(orjson.dumps(message).decode())
        async with asyncio.timeout(60):
            return await fut

    def when(self, method: str) -> asyncio.Future[dict[str, Any]]:
        """A future for the next CDP event ``method``."""
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._listeners.append((method, fut))
        return fut

    async def open(self, path: Path, width: int, height: int) -> None:
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        loaded = self.when("Page.loadEventFired")
        await self.send("Page.navigate", {"url": path.resolve().as_uri()})
        async with asyncio.timeout(60):
            await loaded

    async def evaluate(self, expression: str) -> Any:
        found = await self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in found:
            raise RuntimeError(f"evaluation failed: {found['exceptionDetails']}")
        return found["result"].get("value")

    async def hover(self, x: float, y: float) -> None:
        await self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})

    async def screenshot(self) -> bytes:
        shot = await self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": False})
        return base64.b64decode(shot["data"])

    async def close(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
        if self.process.returncode is None:
            self.process.terminate()
            try:
                async with asyncio.timeout(10):
                    await self.process.wait()
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def decode_png(data: bytes) -> tuple[int, int, list[bytes], int]:
    """(width, height, rows of pixel bytes, bytes per pixel) of an 8-bit RGB/RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos = 8
    idat = b""
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        chunk = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _c, _f, interlace = struct.unpack(">IIBBBBB", chunk)
            if depth != 8 or interlace != 0 or colour not in (2, 6):
                raise ValueError(
                    f"unexpected PNG format: depth {depth}, colour {colour}, interlace {interlace}"
                )
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind = raw[start]
        line = bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                guess = left + up - corner
                pa, pb, pc = abs(guess - left), abs(guess - up), abs(guess - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, rows, channels


def pixel(png: tuple[int, int, list[bytes], int], x: int, y: int) -> tuple[int, int, int]:
    _w, _h, rows, channels = png
    row = rows[y]
    return row[x * channels], row[x * channels + 1], row[x * channels + 2]

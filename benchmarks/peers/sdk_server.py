"""The official Python SDK's remote server (``acp.http.asgi.create_asgi_app``, 1.0.0rc3 ``[http]``)
serving the benchmark's SDK agent (``sdk_agent.BenchAgent``, one per connection, in-process) on
``/acp`` under hypercorn: WebSocket and Streamable HTTP on one port.

``python sdk_server.py [PORT]`` (0: a free port) prints ``listening on http://127.0.0.1:PORT/acp``
on stderr once it accepts connections; SIGTERM/SIGINT stop it.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from pathlib import Path

from acp.http.asgi import create_asgi_app
from hypercorn.asyncio import serve
from hypercorn.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sdk_agent import BenchAgent


async def main(port: int) -> None:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    sock.close()
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.loglevel = "WARNING"
    config.accesslog = None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    app = create_asgi_app(lambda conn: BenchAgent())

    async def announce() -> None:
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.02)
                continue
            writer.close()
            print(f"listening on http://127.0.0.1:{port}/acp", file=sys.stderr, flush=True)
            return

    announcing = asyncio.ensure_future(announce())
    await serve(app, config, shutdown_trigger=stop.wait)  # type: ignore[arg-type]
    announcing.cancel()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 0))

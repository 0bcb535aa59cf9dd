// The official TypeScript SDK's remote server (@agentclientprotocol/sdk 2.4.0's experimental
// `AcpServer` with its Node adapters: Streamable HTTP and WebSocket on `/acp`) serving an agent
// app written with the SDK -- the far end acp-driver's `connect` is tested against.
//
// Usage: node ts_remote_server.mjs. The SDK and `ws` are loaded from ACP_TS_SDK_DIR (Node 20 has
// no global WebSocket: `ws`'s WebSocketServer takes the upgrades). Listens on 127.0.0.1, port 0,
// and prints ONE ready line on stdout: `ts_remote_server: listening on http://127.0.0.1:PORT/acp`.
//
// Prompt commands (the text of the prompt's text blocks):
//   /stream N MS        N agent_message_chunk "chunk I", MS ms apart; session/cancel or
//                       $/cancel_request (on the prompt) stops it: stopReason cancelled
//   /permission         a tool_call, then session/request_permission WITHOUT a cancellation
//                       signal: the agent waits for the client's answer (on session/cancel the
//                       client must answer `cancelled`); reports "permission outcome: <selected
//                       ID|cancelled>"; ends cancelled when the turn was cancelled or the outcome is
//                       cancelled, else end_turn
//   /ignore-cancel MS   one chunk "ignoring", then MS ms during which both cancels are ignored;
//                       ends end_turn (a misbehaving agent: the host's ladder must end the turn)
//   anything else       echoed back as one agent_message_chunk; ends end_turn
// Extension methods: _ts/sleep {"ms": N} -> {"slept": N} ($/cancel_request aborts it: -32800),
// _ts/echo (returns its params).
//
// `GET /seen` answers JSON: `requests`, every request that reached `/acp` (method, the Acp-*,
// Cookie and X-Test headers, HTTP status answered, the start of its body; for a WebSocket the close code and
// reason it got) and `connections`: how many agent connections the AcpServer opened and how many
// have closed since.

import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";

const sdkDir = process.env.ACP_TS_SDK_DIR;
if (!sdkDir) {
  console.error("ts_remote_server: ACP_TS_SDK_DIR is not set");
  process.exit(2);
}
const require = createRequire(path.join(sdkDir, "package.json"));
const load = async (name) => import(pathToFileURL(require.resolve(name)).href);
const acp = await load("@agentclientprotocol/sdk");
const { AcpServer } = await load("@agentclientprotocol/sdk/experimental/server");
const { createNodeHttpHandler, createNodeWebSocketUpgradeHandler } = await load(
  "@agentclientprotocol/sdk/experimental/node",
);
const { WebSocketServer } = require("ws"); // CommonJS
const sdkPackage = path.join(sdkDir, "node_modules", "@agentclientprotocol", "sdk", "package.json");
const sdkVersion = JSON.parse(readFileSync(sdkPackage, "utf8")).version;

const log = (...parts) => console.error("ts_remote_server:", ...parts);
const sessions = new Map(); // sessionId -> { turn: AbortController | null }
let toolIds = 0;

async function say(client, sessionId, text) {
  await client.notify("session/update", {
    sessionId,
    update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
  });
}

async function permission(client, sessionId, turnSignal) {
  const toolCallId = `call-${++toolIds}`;
  const toolCall = { toolCallId, title: "Edit a pretend file", kind: "edit", status: "pending" };
  await client.notify("session/update", { sessionId, update: { sessionUpdate: "tool_call", ...toolCall } });
  // No cancellationSignal: on session/cancel it is the CLIENT that must answer `cancelled`.
  const response = await client.request("session/request_permission", {
    sessionId,
    toolCall,
    options: [
      { optionId: "allow", name: "Allow", kind: "allow_once" },
      { optionId: "reject", name: "Reject", kind: "reject_once" },
    ],
  });
  const outcome = response.outcome;
  const described = outcome.outcome === "selected" ? `selected ${outcome.optionId}` : outcome.outcome;
  const allowed = outcome.outcome === "selected" && outcome.optionId === "allow";
  await client.notify("session/update", {
    sessionId,
    update: { sessionUpdate: "tool_call_update", toolCallId, status: allowed ? "completed" : "failed" },
  });
  await say(client, sessionId, `permission outcome: ${described}`);
  return turnSignal.aborted || described === "cancelled" ? "cancelled" : "end_turn";
}

const app = acp
  .agent({ name: "ts-remote-agent" })
  .onRequest("initialize", () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: { loadSession: false },
    agentInfo: { name: "ts-remote-agent", title: "TS SDK remote agent", version: sdkVersion },
    authMethods: [],
  }))
  .onRequest("session/new", () => {
    const sessionId = `ts-${randomUUID()}`;
    sessions.set(sessionId, { turn: null });
    return { sessionId };
  })
  .onNotification("session/cancel", ({ params }) => {
    log("session/cancel", params.sessionId);
    sessions.get(params.sessionId)?.turn?.abort(new Error("session/cancel"));
  })
  .onRequest("session/prompt", async ({ params, signal, client }) => {
    const { sessionId } = params;
    const state = sessions.get(sessionId);
    if (!state) throw acp.RequestError.resourceNotFound(sessionId);
    const turn = new AbortController();
    state.turn = turn;
    // The turn ends on session/cancel (turn) or $/cancel_request for the prompt (signal).
    const turnSignal = AbortSignal.any([signal, turn.signal]);
    const text = params.prompt
      .filter((block) => block.type === "text")
      .map((block) => block.text)
      .join("")
      .trim();
    const [command, ...args] = text.split(/\s+/);
    try {
      if (command === "/stream") {
        const [count, ms] = args.map(Number);
        for (let i = 0; i < count; i++) {
          if (turnSignal.aborted) return { stopReason: "cancelled" };
          await say(client, sessionId, `chunk ${i}`);
          try {
            await sleep(ms, undefined, { signal: turnSignal });
          } catch (error) {
            if (!turnSignal.aborted) throw error;
          }
        }
        return { stopReason: turnSignal.aborted ? "cancelled" : "end_turn" };
      }
      if (command === "/permission") {
        return { stopReason: await permission(client, sessionId, turnSignal) };
      }
      if (command === "/ignore-cancel") {
        await say(client, sessionId, "ignoring");
        await sleep(Number(args[0])); // no signal: both cancels are ignored
        return { stopReason: "end_turn" };
      }
      await say(client, sessionId, text);
      return { stopReason: "end_turn" };
    } finally {
      if (state.turn === turn) state.turn = null;
    }
  })
  .onRequest(
    "_ts/sleep",
    (params) => params ?? {},
    async ({ params, signal }) => {
      const ms = Number(params.ms ?? 0);
      await sleep(ms, undefined, { signal }); // rejects with an AbortError on $/cancel_request
      return { slept: ms };
    },
  )
  .onRequest(
    "_ts/echo",
    (params) => params ?? {},
    ({ params }) => params,
  );

// Count the agent connections the server opens and closes (a connection whose client left
// must be closed by the server).
const connections = { opened: 0, closed: 0 };
const server = new AcpServer({
  createAgent: () => ({
    connect(stream, options) {
      const connection = app.connect(stream, options);
      connections.opened += 1;
      void connection.closed.finally(() => {
        connections.closed += 1;
      });
      return connection;
    },
  }),
});

const seen = [];
const handleHttp = createNodeHttpHandler(server);
const webSockets = new WebSocketServer({ noServer: true });
const upgrades = new WeakMap(); // request -> its /seen entry
// `ws`'s server as the adapter uses it, recording the close code each socket got.
const upgrader = {
  on: (event, listener) => webSockets.on(event, listener),
  off: (event, listener) => webSockets.off(event, listener),
  handleUpgrade(req, socket, head, callback) {
    webSockets.handleUpgrade(req, socket, head, (webSocket) => {
      const entry = upgrades.get(req);
      webSocket.on("close", (code, reason) => {
        entry.close_code = code;
        entry.close_reason = reason.toString();
      });
      callback(webSocket);
    });
  },
};
const handleUpgrade = createNodeWebSocketUpgradeHandler(server, upgrader);

function record(req) {
  const entry = {
    method: req.headers.upgrade ? "WS" : req.method,
    connection: req.headers["acp-connection-id"] ?? null,
    session: req.headers["acp-session-id"] ?? null,
    cookie: req.headers.cookie ?? null,
    tag: req.headers["x-test"] ?? null, // a test names its requests with this header
    status: null,
    body: "",
  };
  seen.push(entry);
  return entry;
}

const httpServer = http.createServer((req, res) => {
  const url = new URL(req.url ?? "/", "http://localhost");
  if (req.method === "GET" && url.pathname === "/seen") {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ requests: seen, connections }));
    return;
  }
  if (url.pathname !== "/acp") {
    res.writeHead(404).end();
    return;
  }
  const entry = record(req);
  req.on("data", (chunk) => {
    if (entry.body.length < 4096) entry.body += chunk.toString("utf8").slice(0, 4096 - entry.body.length);
  });
  // The adapter sets `statusCode` and flushes the headers at once (an SSE stream stays open).
  const flushHeaders = res.flushHeaders;
  res.flushHeaders = function () {
    entry.status = res.statusCode;
    return flushHeaders.call(this);
  };
  res.on("close", () => {
    entry.status ??= res.statusCode;
  });
  handleHttp(req, res);
});
httpServer.on("upgrade", (req, socket, head) => {
  const url = new URL(req.url ?? "/", "http://localhost");
  if (url.pathname !== "/acp") {
    socket.destroy();
    return;
  }
  const entry = record(req);
  entry.status = 101;
  upgrades.set(req, entry);
  handleUpgrade(req, socket, head);
});

async function shutdown(signalName) {
  log(`${signalName}: closing`);
  await server.close();
  httpServer.close();
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));

httpServer.listen(0, "127.0.0.1", () => {
  const { port } = httpServer.address();
  log(`@agentclientprotocol/sdk ${sdkVersion}`);
  process.stdout.write(`ts_remote_server: listening on http://127.0.0.1:${port}/acp\n`);
});

// The official TypeScript SDK's remote CLIENT transports (@agentclientprotocol/sdk 2.4.0:
// `createWebSocketStream` with `ws`'s WebSocket, `createHttpStream` with Node's fetch) driving a
// client app against acp-driver's `serve` (serving the bundled reference agent).
//
// Usage: node ts_remote_client.mjs PROFILE URL SCENARIO, PROFILE `websocket` or `http`, URL the
// server's http://HOST:PORT/acp. The SDK and `ws` are loaded from ACP_TS_SDK_DIR. Prints ONE JSON
// object on stdout (last line): the scenario's observations, `updates` (every session/update),
// `wire` (every message through the SDK stream, both ways), `requests` (every HTTP request the
// transport made: method, Acp-* and Cookie headers sent, status answered) or `socket` (the
// WebSocket's upgrade status, Acp-Connection-Id and Set-Cookie, close code).
//
// Scenarios:
//   session  initialize; session/new; a turn "/stream 3 0\n/permission" (the client answers the
//            permission request with its allow option); a turn "/stream 1000 20" cancelled with
//            session/cancel after its first update; _acp_driver/sleep cancelled through the
//            SDK's cancellationSignal ($/cancel_request); then the client closes, and connects
//            again with the same (caller-owned) cookie store: `reconnect.cookie` is the Cookie
//            its first request carried.
//   unknown_session  initialize; session/new; a session/prompt naming a session the agent
//            does not have; then _acp_driver/echo (is the connection still there?).
//   leave    initialize; session/new; a turn "/stream 100000 10"; after its first update the
//            script prints {"event": "mid-turn"} and waits for a line on stdin, then LEAVES with
//            the turn live: mode `close` (argv[5]) closes the SDK connection (WebSocket close /
//            HTTP DELETE), mode `exit` ends the process without closing anything.

import { createRequire } from "node:module";
import path from "node:path";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";

const sdkDir = process.env.ACP_TS_SDK_DIR;
if (!sdkDir) {
  console.error("ts_remote_client: ACP_TS_SDK_DIR is not set");
  process.exit(2);
}
const require = createRequire(path.join(sdkDir, "package.json"));
const load = async (name) => import(pathToFileURL(require.resolve(name)).href);
const acp = await load("@agentclientprotocol/sdk");
const { createWebSocketStream, MemoryAcpCookieStore } = await load("@agentclientprotocol/sdk/experimental/ws-client");
const { createHttpStream } = await load("@agentclientprotocol/sdk/experimental/http-client");
const { WebSocket } = require("ws"); // CommonJS

const [profile, url, scenario, leaveMode = "close"] = process.argv.slice(2);
const out = { profile, scenario, updates: [], wire: [], permission_requests: [], requests: [], socket: {} };
const log = (...parts) => console.error("ts_remote_client:", ...parts);
const emit = (value) => new Promise((resolve) => process.stdout.write(JSON.stringify(value) + "\n", resolve));

async function waitFor(predicate, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

// Record every message through the SDK's stream (the JSON-RPC objects it reads and writes).
function tap(stream) {
  const record = (d) =>
    new TransformStream({
      transform(message, controller) {
        out.wire.push({ d, m: message });
        controller.enqueue(message);
      },
    });
  const outgoing = record("outgoing");
  void outgoing.readable.pipeTo(stream.writable).catch(() => {});
  return { writable: outgoing.writable, readable: stream.readable.pipeThrough(record("incoming")) };
}

// Node's fetch, recording what the SDK's HTTP transport sent and what it was answered.
async function recordingFetch(input, init) {
  const headers = new Headers(init?.headers);
  const entry = {
    method: init?.method ?? "GET",
    connection: headers.get("acp-connection-id"),
    session: headers.get("acp-session-id"),
    cookie: headers.get("cookie"),
    status: null,
  };
  if (typeof init?.body === "string") {
    const message = JSON.parse(init.body);
    entry.message = "method" in message ? message.method : { answer_to: message.id, result: message.result };
  }
  out.requests.push(entry);
  let response;
  try {
    response = await fetch(input, init);
  } catch (error) {
    entry.error = error?.name ?? String(error); // e.g. AbortError: the SDK's close aborted it
    throw error;
  }
  entry.status = response.status;
  entry.set_cookie = response.headers.get("set-cookie");
  entry.answered_connection = response.headers.get("acp-connection-id");
  return response;
}

// `ws`'s WebSocket, recording the Cookie it was given, the upgrade answer and the close code.
class RecordingWebSocket extends WebSocket {
  constructor(...args) {
    super(...args);
    out.socket.cookie = args[2]?.headers?.Cookie ?? null;
    this.on("upgrade", (response) => {
      out.socket.status = response.statusCode;
      out.socket.connection = response.headers["acp-connection-id"] ?? null;
      out.socket.set_cookie = response.headers["set-cookie"] ?? null;
    });
    this.on("close", (code) => {
      out.socket.close_code = code;
    });
  }
}

// A caller-owned cookie store: the SDK keeps the server's cookies in it across connections
// (its own store is cleared when a connection closes).
const cookieStore = new MemoryAcpCookieStore();
const openStream = () =>
  tap(
    profile === "websocket"
      ? createWebSocketStream(url.replace(/^http/, "ws"), { WebSocket: RecordingWebSocket, cookieStore })
      : createHttpStream(url, { fetch: recordingFetch, cookieStore }),
  );
const stream = openStream();

const app = acp
  .client({ name: "ts-remote-client" })
  .onNotification("session/update", ({ params }) => {
    out.updates.push(params.update);
  })
  .onRequest("session/request_permission", ({ params }) => {
    out.permission_requests.push(params);
    const allow = params.options.find((o) => o.kind.startsWith("allow"));
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  });

const texts = () =>
  out.updates.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text);

async function run(ctx) {
  const init = await ctx.request("initialize", {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    clientInfo: { name: "ts-remote-client", version: "0" },
  });
  out.agent_info = init.agentInfo;
  out.protocol_version = init.protocolVersion;
  const { sessionId } = await ctx.request("session/new", { cwd: process.cwd(), mcpServers: [] });
  out.session_id = sessionId;
  const prompt = (text) => ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });

  if (scenario === "session") {
    out.turn = { stop_reason: (await prompt("/stream 3 0\n/permission")).stopReason, texts: texts() };

    const before = out.updates.length;
    const pending = prompt("/stream 1000 20");
    await waitFor(() => out.updates.length > before, 30000, "the first update of the turn");
    await ctx.notify("session/cancel", { sessionId });
    const cancelled = await pending;
    out.cancelled_turn = { stop_reason: cancelled.stopReason, updates: out.updates.length - before };

    const controller = new AbortController();
    const sleeping = ctx.request("_acp_driver/sleep", { ms: 600000 }, { cancellationSignal: controller.signal });
    await waitFor(
      () => out.wire.some((e) => e.d === "outgoing" && e.m.method === "_acp_driver/sleep"),
      30000,
      "_acp_driver/sleep to go out",
    );
    controller.abort(); // the SDK sends $/cancel_request and waits for the answer
    try {
      out.cancel_request = { result: await sleeping };
    } catch (error) {
      out.cancel_request = { error: { code: error.code, message: error.message } };
    }
    out.after_cancel_request = await ctx.request("_acp_driver/echo", { still: "here" });
    return;
  }
  if (scenario === "unknown_session") {
    const settle = (promise) =>
      promise.then(
        (result) => ({ result }),
        (error) => ({ error: { code: error.code, message: error.message, data: error.data } }),
      );
    out.unknown_session = await settle(
      ctx.request("session/prompt", { sessionId: "no-such-session", prompt: [{ type: "text", text: "hi" }] }),
    );
    out.after_unknown_session = await settle(ctx.request("_acp_driver/echo", { still: "here" }));
    return;
  }
  if (scenario === "leave") {
    void prompt("/stream 100000 10").catch(() => {}); // rejected when the connection closes
    await waitFor(() => out.updates.length > 0, 30000, "the first update");
    await emit({ event: "mid-turn" });
    const lines = createInterface({ input: process.stdin });
    await new Promise((resolve) => lines.once("line", resolve));
    lines.close();
    out.updates_seen = out.updates.length;
    if (leaveMode === "exit") {
      // Leave without closing anything: the OS closes the sockets when the process ends.
      await emit(summary());
      process.exit(0);
    }
    return; // connectWith closes the connection: WebSocket close / HTTP DELETE
  }
  throw new Error(`unknown scenario ${scenario}`);
}

function summary() {
  return { ...out, wire: out.wire.length > 2000 ? out.wire.slice(0, 2000) : out.wire };
}

// Let the close reach the server before going on: the WebSocket closing handshake, or the answer
// to the HTTP DELETE (connectWith does not wait for the transport to close).
async function transportClosed() {
  const closed =
    profile === "websocket"
      ? () => out.socket.close_code !== undefined
      : () => out.requests.some((r) => r.method === "DELETE" && r.status !== null);
  await waitFor(closed, 10000, "the transport to close").catch((error) => log(String(error)));
}

// A second connection with the same cookie store: its first request must carry the cookie the
// server set on the first one (the RFD's affinity across reconnects).
async function reconnect() {
  const first = { socket: out.socket, requests: out.requests };
  out.socket = {};
  out.requests = [];
  try {
    await app.connectWith(openStream(), async (ctx) => {
      const init = await ctx.request("initialize", {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: {},
        clientInfo: { name: "ts-remote-client", version: "0" },
      });
      out.reconnect = { agent: init.agentInfo.name };
    });
    await transportClosed();
    out.reconnect.cookie = profile === "websocket" ? out.socket.cookie : out.requests[0].cookie;
  } finally {
    out.reconnect_socket = out.socket;
    out.reconnect_requests = out.requests;
    out.socket = first.socket;
    out.requests = first.requests;
  }
}

let failure = null;
const timer = setTimeout(() => {
  failure = "scenario timed out after 60 s";
  void emit({ ...summary(), failure }).then(() => process.exit(1));
}, 60000);
try {
  await app.connectWith(stream, run); // closes the connection when done
  await transportClosed();
  if (scenario === "session") await reconnect();
} catch (error) {
  failure = String(error?.stack ?? error);
}
clearTimeout(timer);
if (failure) out.failure = failure;
await emit(summary());
process.exit(failure ? 1 : 0);

// An ACP agent written with the official TypeScript SDK (@agentclientprotocol/sdk).
//
// SDK 2.x removed the legacy `AgentSideConnection` class; its replacement is the app API:
// `agent()` + `onRequest`/`onNotification`, connected to `ndJsonStream(stdout, stdin)`.
// The SDK is loaded from the folder named by ACP_TS_SDK_DIR (where the test setup ran
// `npm install`), so this file can live outside that folder.
//
// Prompt commands (the text of the prompt's text blocks):
//   /sleep MS                one agent_message_chunk "sleeping", then waits MS ms; ends
//                            `cancelled` when session/cancel or $/cancel_request (on the prompt)
//                            aborts it
//   /permission              a tool_call, then session/request_permission with
//                            `cancellationSignal` = the turn's signal: when the turn is
//                            cancelled the SDK sends $/cancel_request for it; reports
//                            "permission outcome: <selected ID|cancelled|error CODE>"
//   /permission-withdraw MS  the same, but the agent itself withdraws the request after MS ms
//                            (internal cancellation: the SDK sends $/cancel_request) and the
//                            turn goes on to end_turn
//   anything else            echoed back as one agent_message_chunk; ends end_turn
// Extension method: _ts/sleep {"ms": N} -> {"slept": N}; $/cancel_request aborts it (-32800).

import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";

const sdkDir = process.env.ACP_TS_SDK_DIR;
if (!sdkDir) {
  console.error("ts_agent: ACP_TS_SDK_DIR is not set");
  process.exit(2);
}
const require = createRequire(path.join(sdkDir, "package.json"));
const acp = await import(pathToFileURL(require.resolve("@agentclientprotocol/sdk")).href);
const sdkPackage = path.join(sdkDir, "node_modules", "@agentclientprotocol", "sdk", "package.json");
const sdkVersion = JSON.parse(readFileSync(sdkPackage, "utf8")).version;

const log = (...parts) => console.error("ts_agent:", ...parts);
const sessions = new Map(); // sessionId -> { turn: AbortController | null }
let toolIds = 0;

async function say(client, sessionId, text) {
  await client.notify("session/update", {
    sessionId,
    update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
  });
}

function describe(error) {
  if (error && typeof error.code === "number") return `error ${error.code}`;
  return `error ${String(error)}`;
}

async function permission(client, sessionId, turnSignal, withdrawAfterMs) {
  const toolCallId = `call-${++toolIds}`;
  const toolCall = { toolCallId, title: "Edit a pretend file", kind: "edit", status: "pending" };
  await client.notify("session/update", { sessionId, update: { sessionUpdate: "tool_call", ...toolCall } });
  const signals = [turnSignal];
  if (withdrawAfterMs !== undefined) signals.push(AbortSignal.timeout(withdrawAfterMs));
  let described;
  let allowed = false;
  try {
    const response = await client.request(
      "session/request_permission",
      {
        sessionId,
        toolCall,
        options: [
          { optionId: "allow", name: "Allow", kind: "allow_once" },
          { optionId: "reject", name: "Reject", kind: "reject_once" },
        ],
      },
      { cancellationSignal: AbortSignal.any(signals) },
    );
    const outcome = response.outcome;
    described = outcome.outcome === "selected" ? `selected ${outcome.optionId}` : outcome.outcome;
    allowed = outcome.outcome === "selected" && outcome.optionId === "allow";
  } catch (error) {
    described = describe(error);
  }
  await client.notify("session/update", {
    sessionId,
    update: { sessionUpdate: "tool_call_update", toolCallId, status: allowed ? "completed" : "failed" },
  });
  await say(client, sessionId, `permission outcome: ${described}`);
  return turnSignal.aborted || described === "cancelled" ? "cancelled" : "end_turn";
}

const app = acp
  .agent({ name: "ts-interop-agent" })
  .onRequest("initialize", () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: { loadSession: false },
    agentInfo: { name: "ts-interop-agent", title: "TS SDK interop agent", version: sdkVersion },
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
    const [command, arg] = text.split(/\s+/);
    try {
      if (command === "/sleep") {
        await say(client, sessionId, "sleeping");
        try {
          await sleep(Number(arg), undefined, { signal: turnSignal });
        } catch (error) {
          if (!turnSignal.aborted) throw error;
          log("turn cancelled while sleeping");
          return { stopReason: "cancelled" };
        }
        return { stopReason: "end_turn" };
      }
      if (command === "/permission") {
        return { stopReason: await permission(client, sessionId, turnSignal) };
      }
      if (command === "/permission-withdraw") {
        return { stopReason: await permission(client, sessionId, turnSignal, Number(arg)) };
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
      log("_ts/sleep started"); // what a test waits for before it cancels
      await sleep(ms, undefined, { signal }); // rejects with an AbortError on $/cancel_request
      return { slept: ms };
    },
  );

const connection = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
log(`@agentclientprotocol/sdk ${sdkVersion} ready`);
await connection.closed;
log("connection closed; exiting");
process.exit(0);

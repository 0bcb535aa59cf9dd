// An ACP v2 agent written with the official TypeScript SDK's `@agentclientprotocol/sdk/experimental/v2`
// (2.4.0+), loaded from the folder named by ACP_TS_SDK_DIR. Serves ACP v2 on stdin/stdout until
// stdin ends.
//
// The SDK gives an agent typed handlers and nothing of the v2 lifecycle: this script does it all
// itself, the way the SDK lets it -- answers session/prompt when the user message is inserted (its
// messageId), reports running / requires_action / idle with state_update, holds a prompt sent
// while the session works and inserts it later, in order.
//
// Cancellation, the way the SDK lets it: the work of a prompt has an AbortController.
// session/cancel aborts it: an abortable sleep ends, and a pending permission request -- sent with
// `cancellationSignal` and `stopWaitingOnCancel: true` -- is withdrawn by the SDK with
// $/cancel_request and rejected at once; the work then ends with an idle `cancelled`. Held
// prompts are answered -32800. $/cancel_request on a held prompt aborts its handler's `signal`
// (the SDK's doing): the handler leaves the queue and answers -32800; the running work goes on.
// session/close cancels like session/cancel and answers after the idle.
//
// Prompt commands, the same as sdk_v2_agent.py:
//   /stream N MS    N agent_message_chunk "w0 " .. "w{N-1} ", MS ms apart; end_turn
//   /sleep MS       a chunk "sleeping", then MS ms (a slow turn); end_turn
//   /permission     tool_call_update (pending), requires_action, session/request_permission
//                   (allow / reject); on the answer running, the tool call completed or failed,
//                   a chunk "permission outcome: ..."; end_turn. A `cancelled` answer that came
//                   after a session/cancel is the cancel's: the work ends `cancelled`
//   /oblivious MS   an agent that does nothing about a cancel: a chunk "oblivious", MS ms that
//                   nothing interrupts, end_turn; session/cancel is ignored meanwhile
//   /permission-oblivious   /permission, by an agent that does nothing about a cancel: it keeps
//                   waiting for the answer
//   /permission-withdraw MS   /permission, but the agent gives up waiting after MS ms and withdraws
//                   the request itself (its `cancellationSignal` aborts: the SDK sends
//                   $/cancel_request); then running, the tool call failed, a chunk "permission
//                   withdrawn"; end_turn
//   anything else   echoed back as one chunk; end_turn

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";

const sdkDir = process.env.ACP_TS_SDK_DIR;
if (!sdkDir) {
  console.error("ts_v2_agent: ACP_TS_SDK_DIR is not set");
  process.exit(2);
}
const require = createRequire(path.join(sdkDir, "package.json"));
const v2 = await import(pathToFileURL(require.resolve("@agentclientprotocol/sdk/experimental/v2")).href);
const sdkPackage = path.join(sdkDir, "node_modules", "@agentclientprotocol", "sdk", "package.json");
const sdkVersion = JSON.parse(readFileSync(sdkPackage, "utf8")).version;

const log = (...parts) => console.error("ts_v2_agent:", ...parts);
let counter = 0;
const next = () => ++counter;

class Session {
  constructor(id) {
    this.id = id;
    this.busy = false;
    this.waiting = []; // held prompts, in order: { resolve, reject }
    this.work = null; // { controller, done }
    this.oblivious = false;
    this.cancels = 0;
  }

  // Wait for the session's turn, in order; a held prompt whose `signal` aborts leaves the queue.
  acquire(signal) {
    // Withdrawn before its handler ran ($/cancel_request read right after the request): the
    // SDK aborted the signal already, and an "abort" listener added now would never fire.
    if (signal.aborted) return Promise.reject(v2.RequestError.requestCancelled());
    if (!this.busy && this.waiting.length === 0) {
      this.busy = true;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const waiter = { resolve, reject };
      const onAbort = () => {
        const index = this.waiting.indexOf(waiter);
        if (index >= 0) this.waiting.splice(index, 1);
        reject(v2.RequestError.requestCancelled());
      };
      waiter.resolve = () => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      };
      waiter.reject = (error) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  release() {
    const waiter = this.waiting.shift();
    if (waiter) waiter.resolve();
    else this.busy = false;
  }
}

const sessions = new Map();

function session(id) {
  const found = sessions.get(id);
  if (!found) throw new v2.RequestError(-32002, "Session not found", { sessionId: id });
  return found;
}

const update = (client, sessionId, update) =>
  client.notify(v2.methods.client.session.update, { sessionId, update });
const state = (client, sessionId, value, stopReason) =>
  update(client, sessionId, {
    sessionUpdate: "state_update",
    state: value,
    ...(stopReason ? { stopReason } : {}),
  });
const say = (client, sessionId, messageId, text) =>
  update(client, sessionId, { sessionUpdate: "agent_message_chunk", messageId, content: { type: "text", text } });

async function runCommand(client, s, text, messageId, signal) {
  const words = text.split(/\s+/);
  if (text.startsWith("/stream")) {
    const [count, ms] = [Number(words[1]), Number(words[2])];
    for (let i = 0; i < count; i++) {
      if (i && ms) await sleep(ms, undefined, { signal });
      signal.throwIfAborted();
      await say(client, s.id, messageId, `w${i} `);
    }
  } else if (text.startsWith("/sleep")) {
    await say(client, s.id, messageId, "sleeping");
    await sleep(Number(words[1]), undefined, { signal });
  } else if (text.startsWith("/oblivious")) {
    await say(client, s.id, messageId, "oblivious");
    await sleep(Number(words[1]));
  } else if (text === "/permission" || text === "/permission-oblivious") {
    await permission(client, s, messageId, signal);
  } else if (text.startsWith("/permission-withdraw")) {
    await permission(client, s, messageId, signal, Number(words[1]));
  } else {
    await say(client, s.id, messageId, text);
  }
}

async function permission(client, s, messageId, signal, withdrawAfter) {
  const toolCallId = `call-${next()}`;
  await update(client, s.id, {
    sessionUpdate: "tool_call_update",
    toolCallId,
    title: "Edit a pretend file",
    kind: "edit",
    status: "pending",
  });
  await state(client, s.id, "requires_action");
  let response;
  const giveUp = withdrawAfter === undefined ? undefined : AbortSignal.timeout(withdrawAfter);
  try {
    response = await client.request(
      v2.methods.client.session.requestPermission,
      {
        sessionId: s.id,
        title: "Edit a pretend file",
        subject: { type: "tool_call", toolCall: { toolCallId } },
        options: [
          { optionId: "allow", name: "Allow", kind: "allow_once" },
          { optionId: "reject", name: "Reject", kind: "reject_once" },
        ],
      },
      { cancellationSignal: giveUp ? AbortSignal.any([signal, giveUp]) : signal, stopWaitingOnCancel: true },
    );
  } catch (error) {
    if (giveUp?.aborted && !signal.aborted) {
      log("permission request withdrawn by the agent");
      await state(client, s.id, "running");
      await update(client, s.id, { sessionUpdate: "tool_call_update", toolCallId, status: "failed" });
      await say(client, s.id, messageId, "permission withdrawn");
      return;
    }
    if (signal.aborted) {
      // The SDK has sent $/cancel_request for it: the tool call's last update goes before the idle.
      await update(client, s.id, { sessionUpdate: "tool_call_update", toolCallId, status: "cancelled" }).catch(() => {});
    }
    throw error;
  }
  if (response.outcome.outcome === "cancelled") {
    // The SDK settles a response the moment it reads it but runs a notification's handler some
    // steps later, so a session/cancel the client sent just before this answer (the order the
    // spec gives: session/cancel, then the pending permissions answered `cancelled`) may not
    // have been handled yet. An agent takes the client's messages in the order sent: let the SDK
    // dispatch what came before, then tell a cancel (the work ends `cancelled`) from a refusal.
    await new Promise((resolve) => setImmediate(resolve));
    if (signal.aborted) {
      await update(client, s.id, { sessionUpdate: "tool_call_update", toolCallId, status: "cancelled" }).catch(() => {});
      signal.throwIfAborted();
    }
  }
  await state(client, s.id, "running");
  const outcome = response.outcome;
  const selected = outcome.outcome === "selected";
  const described = selected ? `selected ${outcome.optionId}` : String(outcome.outcome);
  const allowed = selected && outcome.optionId === "allow";
  await update(client, s.id, { sessionUpdate: "tool_call_update", toolCallId, status: allowed ? "completed" : "failed" });
  await say(client, s.id, messageId, `permission outcome: ${described}`);
}

async function work(client, s, text, messageId, controller) {
  let stop = "end_turn";
  try {
    await runCommand(client, s, text, messageId, controller.signal);
  } catch (error) {
    if (controller.signal.aborted) {
      log("work cancelled");
      stop = "cancelled";
    } else {
      log("work failed:", error);
      stop = "error";
    }
  } finally {
    s.oblivious = false;
    try {
      await state(client, s.id, "idle", stop);
    } finally {
      s.work = null;
      s.release();
    }
  }
}

// Cancel the session's held prompts and its work; return the work's end, to await its idle.
function stop(s) {
  if (s.oblivious) {
    log("session/cancel ignored: the running work is oblivious");
    return undefined;
  }
  for (const waiter of s.waiting.splice(0)) waiter.reject(v2.RequestError.requestCancelled());
  if (!s.work) return undefined;
  s.work.controller.abort();
  return s.work.done;
}

const app = v2
  .agent({ name: "ts-v2-interop-agent" })
  .onRequest(v2.methods.agent.initialize, async () => ({
    protocolVersion: v2.PROTOCOL_VERSION,
    info: { name: "ts-v2-interop-agent", version: sdkVersion },
    capabilities: { session: {} },
  }))
  .onRequest(v2.methods.agent.session.new, async () => {
    const id = `ts2-${next()}-${Date.now().toString(36)}`;
    sessions.set(id, new Session(id));
    return { sessionId: id };
  })
  .onRequest(v2.methods.agent.session.prompt, async ({ params, signal, client }) => {
    const s = session(params.sessionId);
    const text = params.prompt
      .map((block) => (block.type === "text" ? block.text : ""))
      .join("")
      .trim();
    await s.acquire(signal); // held while the session works; -32800 when withdrawn or cancelled
    const cancels = s.cancels;
    const n = next();
    const messageId = `u-${n}`;
    try {
      await update(client, s.id, { sessionUpdate: "user_message", messageId, content: [{ type: "text", text }] });
      await state(client, s.id, "running");
    } catch (error) {
      s.release();
      throw error;
    }
    s.oblivious = text.startsWith("/oblivious") || text === "/permission-oblivious";
    const controller = new AbortController();
    s.work = { controller, done: work(client, s, text, `a-${n}`, controller) };
    if (s.cancels !== cancels) stop(s); // a cancel arrived while the prompt was being inserted
    return { messageId };
  })
  .onNotification(v2.methods.agent.session.cancel, async ({ params }) => {
    log("session/cancel", params.sessionId);
    const s = sessions.get(params.sessionId);
    if (!s) return;
    s.cancels += 1;
    stop(s);
  })
  .onRequest(v2.methods.agent.session.close, async ({ params }) => {
    const s = session(params.sessionId);
    const done = stop(s);
    if (done) await done; // its idle "cancelled" goes out before this answer
    sessions.delete(params.sessionId);
    return {};
  });

log(`@agentclientprotocol/sdk ${sdkVersion} (experimental/v2) ready`);
const connection = app.connect(v2.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await connection.closed;
log("connection closed; exiting");
process.exit(0);

// An ACP v2 agent written with the official TypeScript SDK 2.4.0's `…/experimental/v2`, on stdio,
// for the v2 benchmark rows (benchmarks/v2.py).
//
// The SDK gives an agent typed handlers and nothing of the v2 lifecycle, and enforces no
// cancellation rule (nothing sends the idle `cancelled` for an agent that ignores session/cancel).
// So this agent does what a correct v2 agent must, the way an SDK user writes it, and no more:
// session/prompt is held while the session works (in order; -32800 when cancelled or withdrawn),
// then inserted -- the user_message echo, running, the work started, the answer {messageId};
// the work (`/stream N MS`: N agent_message_chunk with the message's id; `/sleep MS`) ends with an
// idle state_update `end_turn`; session/cancel aborts the work's AbortController and the work
// ends with the idle `cancelled`.
import { Readable, Writable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";
import path from "node:path";

const sdkDir = process.env.ACP_TS_SDK_DIR ?? path.join(import.meta.dirname, "..", ".work", "ts", "node_modules", "@agentclientprotocol", "sdk");
const v2 = await import(pathToFileURL(path.join(sdkDir, "dist", "v2", "stable", "acp.js")).href);

let counter = 0;
const sessions = new Map(); // sessionId -> { busy, waiting: [resolve...], work: AbortController | null }

const update = (client, sessionId, u) => client.notify(v2.methods.client.session.update, { sessionId, update: u });

function acquire(s, signal) {
  if (signal.aborted) return Promise.reject(v2.RequestError.requestCancelled());
  if (!s.busy && s.waiting.length === 0) {
    s.busy = true;
    return Promise.resolve();
  }
  return new Promise((resolve, reject) => {
    const waiter = { resolve, reject };
    s.waiting.push(waiter);
    signal.addEventListener("abort", () => {
      const i = s.waiting.indexOf(waiter);
      if (i >= 0) s.waiting.splice(i, 1);
      reject(v2.RequestError.requestCancelled());
    }, { once: true });
  });
}

function release(s) {
  const waiter = s.waiting.shift();
  if (waiter) waiter.resolve();
  else s.busy = false;
}

async function work(client, sessionId, s, text, messageId, controller) {
  const signal = controller.signal;
  let stopReason = "end_turn";
  try {
    for (const line of text.split("\n")) {
      const words = line.trim().split(/\s+/);
      if (words[0] === "/stream") {
        const [n, ms] = [Number(words[1]), Number(words[2] ?? 0)];
        for (let i = 0; i < n; i++) {
          if (i && ms) await sleep(ms, undefined, { signal });
          signal.throwIfAborted();
          await update(client, sessionId, {
            sessionUpdate: "agent_message_chunk",
            messageId,
            content: { type: "text", text: `chunk ${i + 1}/${n}\n` },
          });
        }
      } else if (words[0] === "/sleep") {
        await sleep(Number(words[1]), undefined, { signal });
      }
    }
  } catch (error) {
    if (!signal.aborted) throw error;
    stopReason = "cancelled"; // a cancel ends in the idle `cancelled`, never an error
  } finally {
    try {
      await update(client, sessionId, { sessionUpdate: "state_update", state: "idle", stopReason });
    } finally {
      s.work = null;
      release(s);
    }
  }
}

const app = v2
  .agent({ name: "bench-ts-v2-agent" })
  .onRequest(v2.methods.agent.initialize, async () => ({
    protocolVersion: v2.PROTOCOL_VERSION,
    info: { name: "bench-ts-v2-agent", version: "0" },
    capabilities: {},
  }))
  .onRequest(v2.methods.agent.session.new, async () => {
    const sessionId = `sess_${++counter}`;
    sessions.set(sessionId, { busy: false, waiting: [], work: null });
    return { sessionId };
  })
  .onRequest(v2.methods.agent.session.prompt, async ({ params, signal, client }) => {
    const s = sessions.get(params.sessionId);
    await acquire(s, signal); // held while the session works
    const n = ++counter;
    const messageId = `u${n}`;
    try {
      await update(client, params.sessionId, { sessionUpdate: "user_message", messageId, content: params.prompt });
      await update(client, params.sessionId, { sessionUpdate: "state_update", state: "running" });
    } catch (error) {
      release(s);
      throw error;
    }
    const text = params.prompt.map((b) => (b.type === "text" ? b.text : "")).join("\n");
    const controller = new AbortController();
    s.work = controller;
    void work(client, params.sessionId, s, text, `a${n}`, controller).catch((error) => console.error("ts_agent_v2:", error));
    return { messageId };
  })
  .onNotification(v2.methods.agent.session.cancel, async ({ params }) => {
    const s = sessions.get(params.sessionId);
    if (!s) return;
    for (const waiter of s.waiting.splice(0)) waiter.reject(v2.RequestError.requestCancelled());
    s.work?.abort();
  });

const connection = app.connect(v2.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await connection.closed;
process.exit(0);

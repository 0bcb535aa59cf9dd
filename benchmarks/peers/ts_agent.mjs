// An ACP agent written with the official TypeScript SDK (@agentclientprotocol/sdk 2.4.0), on stdio.
//
// SDK 2.x has no AgentSideConnection any more (removed in favour of the app API): this is
// `agent({...}).onRequest(...).connect(ndJsonStream(stdout, stdin))`, the SDK's documented way.
// Speaks what the benchmark needs: initialize, session/new, session/prompt (prompt lines
// `/stream N MS` and `/sleep MS`), session/cancel, and the extension methods `_bench/echo`
// (returns its params) and `_bench/sleep` {"ms": N} (aborted by $/cancel_request -> -32800).
import { Readable, Writable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";
import path from "node:path";

const sdkDir = process.env.ACP_TS_SDK_DIR ?? path.join(import.meta.dirname, "..", ".work", "ts", "node_modules", "@agentclientprotocol", "sdk");
const acp = await import(pathToFileURL(path.join(sdkDir, "dist", "v1", "stable", "acp.js")).href);

let sessions = 0;
const cancels = new Map(); // sessionId -> () => void

const passthrough = (params) => params;

const app = acp
  .agent({ name: "bench-agent" })
  .onRequest("initialize", () => ({ protocolVersion: 1, agentCapabilities: {}, authMethods: [] }))
  .onRequest("session/new", () => ({ sessionId: `sess_${++sessions}` }))
  .onRequest("session/prompt", async (ctx) => {
    const sessionId = ctx.params.sessionId;
    const text = ctx.params.prompt.filter((b) => b.type === "text").map((b) => b.text).join("\n");
    for (const line of text.split("\n")) {
      const words = line.trim().split(/\s+/);
      if (words[0] === "/stream") {
        const n = Number(words[1]);
        const delay = Number(words[2] ?? 0);
        for (let i = 0; i < n; i++) {
          await ctx.client.notify("session/update", {
            sessionId,
            update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: `chunk ${i + 1}/${n}\n` } },
          });
          if (delay) await sleep(delay);
        }
      } else if (words[0] === "/sleep") {
        const ms = Number(words[1]);
        const cancelled = await new Promise((resolve) => {
          const timer = setTimeout(() => resolve(false), ms);
          cancels.set(sessionId, () => {
            clearTimeout(timer);
            resolve(true);
          });
        });
        cancels.delete(sessionId);
        if (cancelled) return { stopReason: "cancelled" };
      }
    }
    return { stopReason: "end_turn" };
  })
  .onNotification("session/cancel", (ctx) => {
    cancels.get(ctx.params.sessionId)?.();
  })
  .onRequest("_bench/echo", passthrough, (ctx) => ctx.params)
  .onRequest("_bench/sleep", passthrough, async (ctx) => {
    const ms = ctx.params?.ms ?? 0;
    await sleep(ms, undefined, { signal: ctx.signal });
    return { slept: ms };
  });

const connection = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await connection.closed;
process.exit(0);

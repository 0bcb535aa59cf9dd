// Runner: the official TypeScript SDK 2.4.0's ACP v2 client (`…/experimental/v2`) <-> the agent
// written with it (peers/ts_agent_v2.mjs), or the agent the config names (the host-only v2 rows
// drive the ceiling's v2 agent). Both on node.
//
// The SDK's own v2 client workflow: `client().connectWith(stream, ctx => ...)`, `initialize`,
// `ctx.buildSession(cwd).start()` (an ActiveSession), `session.prompt(...)` (answered at
// insertion) and `session.nextUpdate()` to read the session's updates in order: the
// agent_message_chunk ones are counted, the idle state_update ends the turn (the SDK ties no turn
// to a prompt in v2: its reader is the session's queue). The cancel is `session/cancel` sent with
// `ctx.notify`. Prints one JSON object (same shape as the Python runners) on its last stdout line.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const sdkDir = process.env.ACP_TS_SDK_DIR ?? path.join(import.meta.dirname, "..", ".work", "ts", "node_modules", "@agentclientprotocol", "sdk");
const v2 = await import(pathToFileURL(path.join(sdkDir, "dist", "v2", "stable", "acp.js")).href);
const AGENT = path.join(import.meta.dirname, "..", "peers", "ts_agent_v2.mjs");
const VERSION = JSON.parse(readFileSync(path.join(sdkDir, "package.json"), "utf8")).version;
const BUSY_TURN = "/stream 1 0\n/sleep 60000";

const cfg = JSON.parse(process.argv[process.argv.indexOf("--config") + 1]);
const wanted = cfg.workloads ? new Set(cfg.workloads) : null;
const want = (w) => wanted === null || wanted.has(w);
const now = () => performance.now();
function percentile(values, q) {
  const s = [...values].sort((a, b) => a - b);
  const k = Math.max(0, Math.min(s.length - 1, Math.round((q / 100) * s.length + 0.5) - 1));
  return s[k];
}

const results = {};
const errors = {};
const work = {};
async function measure(workload, fn) {
  if (!want(workload)) return;
  try {
    Object.assign(results, await fn());
  } catch (err) {
    errors[workload] = String(err?.stack ?? err).split("\n").slice(0, 6).join("\n");
    console.error(`[ts v2] ${workload} failed: ${errors[workload]}`);
  }
}

// Read the session's updates until the idle: { chunks, stopReason }; `onChunk` at each chunk.
async function untilIdle(session, onChunk) {
  let chunks = 0;
  for (;;) {
    const { update } = await session.nextUpdate();
    if (update.sessionUpdate === "agent_message_chunk") {
      chunks++;
      if (onChunk) onChunk();
    } else if (update.sessionUpdate === "state_update" && update.state === "idle") {
      return { chunks, stopReason: update.stopReason };
    }
  }
}

const argv = Array.isArray(cfg.agent) ? cfg.agent : [process.execPath, AGENT];
const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "inherit"], env: process.env });
const exited = new Promise((resolve) => child.once("exit", resolve));
const stream = v2.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const app = v2.client({ name: "bench-ts-v2-client" });

await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(v2.methods.agent.initialize, {
    protocolVersion: v2.PROTOCOL_VERSION,
    info: { name: "bench-ts-v2-client", version: VERSION },
    capabilities: {},
  });
  if (init.protocolVersion !== 2) throw new Error(`the agent did not answer ACP v2: ${JSON.stringify(init)}`);
  const session = await ctx.buildSession(os.tmpdir()).start();

  await session.prompt(`/stream ${cfg.warmup} 0`); // warm-up turn, as every v2 runner
  await untilIdle(session);

  await measure("stream_v2", async () => {
    const n = cfg.stream;
    const t0 = now();
    const inserted = await session.prompt(`/stream ${n} 0`);
    const { chunks, stopReason } = await untilIdle(session);
    const elapsed = (now() - t0) / 1000;
    if (!inserted.messageId) throw new Error(`stream_v2: ${JSON.stringify(inserted)}`);
    if (stopReason !== "end_turn") throw new Error(`stream_v2: idle ${stopReason}`);
    work.stream_v2 = { updates: chunks };
    return { stream_v2_ups: n / elapsed };
  });

  await measure("cancel_v2", async () => {
    const samples = [];
    let cancelled = 0;
    for (let i = 0; i < cfg.cancel; i++) {
      let busy;
      const busyP = new Promise((resolve) => (busy = resolve));
      const idle = untilIdle(session, () => busy());
      await session.prompt(BUSY_TURN); // inserted
      await busyP; // and busy
      const t0 = now();
      await ctx.notify(v2.methods.agent.session.cancel, { sessionId: session.sessionId });
      const { stopReason } = await idle;
      samples.push(now() - t0);
      if (stopReason === "cancelled") cancelled++;
    }
    work.cancel_v2 = { cancelled };
    return { cancel_v2_p50_ms: percentile(samples, 50), cancel_v2_p99_ms: percentile(samples, 99) };
  });
  session.dispose();
});
child.stdin.end();
const timer = setTimeout(() => child.kill("SIGKILL"), 2000);
await exited;
clearTimeout(timer);
console.log(JSON.stringify({ impl: `ts-${VERSION}`, results, na: {}, errors, notes: { sdk_version: VERSION }, work, pid: process.pid }));
process.exit(0);

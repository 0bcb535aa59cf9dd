// Runner (d): the official TypeScript SDK 2.4.0 client <-> an agent written with it
// (peers/ts_agent.mjs), both run with node. SDK 2.x replaced ClientSideConnection with the app API:
// `client({...}).onNotification("session/update", ...).connect(ndJsonStream(...))`; requests go
// through `connection.agent.request(...)`. Updates are counted in the session/update handler.
// Prints one JSON object (same shape as the Python runners) on its last stdout line.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import path from "node:path";
import os from "node:os";

const sdkDir = process.env.ACP_TS_SDK_DIR ?? path.join(import.meta.dirname, "..", ".work", "ts", "node_modules", "@agentclientprotocol", "sdk");
const acp = await import(pathToFileURL(path.join(sdkDir, "dist", "v1", "stable", "acp.js")).href);
const AGENT = path.join(import.meta.dirname, "..", "peers", "ts_agent.mjs");
const VERSION = JSON.parse(readFileSync(path.join(sdkDir, "package.json"), "utf8")).version;

const cfgIndex = process.argv.indexOf("--config");
const cfg = JSON.parse(process.argv[cfgIndex + 1]);
const wanted = cfg.workloads ? new Set(cfg.workloads) : null;
const want = (w) => wanted === null || wanted.has(w);
const now = () => performance.now();

function rssMib(pid = "self") {
  try {
    const m = readFileSync(`/proc/${pid}/status`, "utf8").match(/^VmRSS:\s+(\d+)/m);
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}
function percentile(values, q) {
  const s = [...values].sort((a, b) => a - b);
  const k = Math.max(0, Math.min(s.length - 1, Math.round((q / 100) * s.length + 0.5) - 1));
  return s[k];
}
const median = (values) => {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

const hooks = { onUpdate: null };

// The agent to drive: the config's `agent` argv (host-only rows: the ceiling agent), else ours.
const agentArgv = Array.isArray(cfg.agent) ? cfg.agent : [process.execPath, AGENT];
async function start() {
  const child = spawn(agentArgv[0], agentArgv.slice(1), { stdio: ["pipe", "pipe", "inherit"], env: process.env });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const app = acp.client({ name: "bench-client" }).onNotification("session/update", (ctx) => {
    if (ctx.params.update.sessionUpdate === "agent_message_chunk" && hooks.onUpdate) hooks.onUpdate(ctx.params);
  });
  const connection = app.connect(stream);
  await connection.agent.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
  return { child, connection, exited };
}

async function stop({ child, connection, exited }) {
  connection.close();
  child.stdin.end();
  const timer = setTimeout(() => child.kill("SIGKILL"), 2000);
  await exited;
  clearTimeout(timer);
}

const results = {};
const na = {};
const errors = {};
const notes = { sdk_version: VERSION };
const work = {};

async function measure(workload, fn) {
  if (!want(workload)) return;
  try {
    Object.assign(results, await fn());
  } catch (err) {
    errors[workload] = String(err?.stack ?? err).split("\n").slice(0, 6).join("\n");
    console.error(`[ts] ${workload} failed: ${errors[workload]}`);
  }
}

const ECHO_PARAMS = { text: "hello", n: 0 };
const peer = await start();
results.rss_host_idle_mib = rssMib();
results.rss_agent_idle_mib = rssMib(peer.child.pid);
const agent = peer.connection.agent;
const sid = (await agent.request("session/new", { cwd: os.tmpdir(), mcpServers: [] })).sessionId;
const echo = (params) => agent.request("_bench/echo", params);

for (let i = 0; i < cfg.warmup; i++) await echo(ECHO_PARAMS);
await Promise.all(Array.from({ length: cfg.warmup }, () => echo(ECHO_PARAMS)));

await measure("seq", async () => {
  const n = cfg.seq;
  const t0 = now();
  let answered = 0;
  for (let i = 0; i < n; i++) if ((await echo(ECHO_PARAMS)).text === "hello") answered++;
  const elapsed = (now() - t0) / 1000;
  work.seq = { answered };
  return { seq_rps: n / elapsed };
});

const concurrent = (workload, key, size, rounds) => async () => {
  let answered = 0;
  const t0 = now();
  for (let r = 0; r < rounds; r++) {
    const answers = await Promise.all(Array.from({ length: size }, () => echo(ECHO_PARAMS)));
    answered += answers.filter((a) => a.text === "hello" && a.n === 0).length;
  }
  const elapsed = (now() - t0) / 1000;
  work[workload] = { answered };
  return { [key]: (size * rounds) / elapsed };
};
await measure("conc1k", concurrent("conc1k", "conc1k_rps", cfg.conc1k, cfg.conc1k_rounds));
await measure("conc10k", concurrent("conc10k", "conc10k_rps", cfg.conc10k, cfg.conc10k_rounds));

const prompt = (text) => agent.request("session/prompt", { sessionId: sid, prompt: [{ type: "text", text }] });

await measure("stream", async () => {
  const n = cfg.stream;
  let count = 0;
  hooks.onUpdate = () => count++;
  const t0 = now();
  const result = await prompt(`/stream ${n} 0`);
  const elapsed = (now() - t0) / 1000;
  hooks.onUpdate = null;
  if (result.stopReason !== "end_turn") throw new Error(`stream: ${JSON.stringify(result)}`);
  work.stream = { updates: count };
  return { stream_ups: n / elapsed };
});

await measure("cancel", async () => {
  const samples = [];
  let cancelled = 0;
  for (let i = 0; i < cfg.cancel; i++) {
    let started;
    const startedP = new Promise((resolve) => (started = resolve));
    hooks.onUpdate = () => started();
    const turn = prompt("/stream 1 0\n/sleep 60000");
    await startedP;
    const t0 = now();
    await agent.notify("session/cancel", { sessionId: sid });
    const result = await turn;
    samples.push(now() - t0);
    if (result.stopReason === "cancelled") cancelled++;
  }
  hooks.onUpdate = null;
  work.cancel = { cancelled };
  return { cancel_p50_ms: percentile(samples, 50), cancel_p99_ms: percentile(samples, 99) };
});

await measure("storm", async () => {
  const n = cfg.storm;
  const controllers = Array.from({ length: n }, () => new AbortController());
  const calls = controllers.map((ac) => agent.request("_bench/sleep", { ms: 60000 }, { cancellationSignal: ac.signal }));
  await echo({ barrier: true });
  const t0 = now();
  for (const ac of controllers) ac.abort();
  const settled = await Promise.allSettled(calls); // each settles with the agent's answer (-32800)
  const elapsed = now() - t0;
  const cancelled = settled.filter((s) => s.status === "rejected" && s.reason?.code === -32800).length;
  work.storm = { ids_answered: cancelled };
  // No ledger to inspect through the SDK's API: storm_ledger_empty is not reported.
  return { storm_ms: elapsed };
});

results.rss_host_load_mib = rssMib();
results.rss_agent_load_mib = rssMib(peer.child.pid);
await stop(peer);

await measure("cold", async () => {
  const samples = [];
  for (let i = 0; i < cfg.cold; i++) {
    const t0 = now();
    const p = await start();
    samples.push(now() - t0);
    await stop(p);
  }
  return { cold_start_ms: median(samples) };
});
if (want("ignored")) na.ignored = "no cancel ladder in the SDK";
if (want("hang")) na.hang = "no cancel ladder in the SDK";

console.log(JSON.stringify({ impl: `ts-${VERSION}`, results, na, errors, notes, work, pid: process.pid }));
process.exit(0);

// An ACP client written with the official TypeScript SDK (@agentclientprotocol/sdk), driving
// OUR reference agent.
//
// Usage: node ts_client.mjs SCENARIO. The SDK is loaded from ACP_TS_SDK_DIR; the agent is
// spawned as ACP_AGENT_PYTHON ACP_AGENT_SCRIPT (ACP_INTEROP_TRACE_FILE is passed on). Prints ONE
// JSON object on stdout: the scenario's observations, `updates` (every session/update the
// client got), `wire` (every message through the SDK stream, both ways) and `agent_exit`.
//
// Scenarios: turn, session_cancel, session_cancel_now, hold, cancel_request_prompt, cancel_request_ext (the same as
// sdk_client.py). The TS SDK cancels an outgoing request when its `cancellationSignal` aborts:
// it sends $/cancel_request and (by default) keeps waiting for the peer's answer, which the
// returned promise then settles with.

import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";

const require = createRequire(path.join(process.env.ACP_TS_SDK_DIR, "package.json"));
const acp = await import(pathToFileURL(require.resolve("@agentclientprotocol/sdk")).href);

const TURN_PROMPT = "/think pondering\n/plan\n/stream 3 0\n/tool lookup\n/permission";
const SLEEPY_PROMPT = "/stream 1 0\n/sleep 30000";
const scenario = process.argv[2];
const out = { scenario, updates: [], wire: [], permission_requests: [] };
const log = (...parts) => console.error("ts_client:", ...parts);

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
        out.wire.push({ d, t: performance.now() / 1000, m: message });
        controller.enqueue(message);
      },
    });
  const outgoing = record("outgoing");
  void outgoing.readable.pipeTo(stream.writable).catch(() => {});
  return { writable: outgoing.writable, readable: stream.readable.pipeThrough(record("incoming")) };
}

const sent = (method) => out.wire.filter((e) => e.d === "outgoing" && e.m.method === method).map((e) => e.m);
const answerTo = (id) =>
  out.wire.find((e) => e.d === "incoming" && !("method" in e.m) && e.m.id === id);

const child = spawn(process.env.ACP_AGENT_PYTHON, [process.env.ACP_AGENT_SCRIPT], {
  stdio: ["pipe", "pipe", "inherit"],
  env: process.env,
});
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve(signal ?? code)));
const stream = tap(acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout)));

const app = acp
  .client({ name: "ts-interop-client" })
  .onNotification("session/update", ({ params }) => {
    out.updates.push(params.update);
  })
  .onRequest("session/request_permission", ({ params }) => {
    out.permission_requests.push(params);
    const allow = params.options.find((o) => o.kind.startsWith("allow"));
    return { outcome: allow ? { outcome: "selected", optionId: allow.optionId } : { outcome: "cancelled" } };
  });

async function run(ctx) {
  const init = await ctx.request("initialize", {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    clientInfo: { name: "ts-interop-client", version: "0" },
  });
  out.agent_info = init.agentInfo;
  const { sessionId } = await ctx.request("session/new", { cwd: process.cwd(), mcpServers: [] });
  const prompt = (text, options) =>
    ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] }, options);

  if (scenario === "turn") {
    out.stop_reason = (await prompt(TURN_PROMPT)).stopReason;
    return;
  }
  if (scenario === "hold") {
    void prompt(SLEEPY_PROMPT).catch(() => {});
    await waitFor(() => out.updates.length > 0, 30000, "the first update");
    log("holding");
    await sleep(3600000);
  }
  if (scenario === "session_cancel" || scenario === "session_cancel_now") {
    const pending = prompt(SLEEPY_PROMPT);
    if (scenario === "session_cancel") {
      await waitFor(() => out.updates.length > 0, 30000, "the first update");
    } else {
      await waitFor(() => sent("session/prompt").length > 0, 30000, "the prompt to go out");
    }
    const started = performance.now();
    await ctx.notify("session/cancel", { sessionId });
    out.stop_reason = (await pending).stopReason;
    out.cancel_to_answer = (performance.now() - started) / 1000;
    return;
  }
  if (scenario === "cancel_request_prompt" || scenario === "cancel_request_ext") {
    const controller = new AbortController();
    let method;
    let pending;
    if (scenario === "cancel_request_prompt") {
      method = "session/prompt";
      pending = prompt(SLEEPY_PROMPT, { cancellationSignal: controller.signal });
      await waitFor(() => out.updates.length > 0, 30000, "the first update");
    } else {
      method = "_acp_driver/sleep";
      pending = ctx.request(method, { ms: 30000 }, { cancellationSignal: controller.signal });
      await waitFor(() => sent(method).length > 0, 30000, `${method} to go out`);
      await sleep(300); // let the agent start serving it
    }
    const [request] = sent(method);
    out.request_id = request.id;
    const started = performance.now();
    controller.abort(); // the SDK sends $/cancel_request and waits for the answer
    try {
      out.caller_saw = { result: await pending };
    } catch (error) {
      out.caller_saw = { error: { code: error.code, message: error.message } };
    }
    out.cancel_to_answer = (performance.now() - started) / 1000;
    out.answer = answerTo(request.id)?.m ?? null;
    return;
  }
  throw new Error(`unknown scenario ${scenario}`);
}

let failure = null;
const timer = setTimeout(() => {
  failure = "scenario timed out after 60 s";
  child.kill("SIGKILL");
}, 60000);
try {
  await app.connectWith(stream, run); // closes the connection (and the agent's stdin) when done
} catch (error) {
  failure = String(error?.stack ?? error);
}
// The connection is closed: the agent reads end of input and must exit by itself.
const killer = setTimeout(() => child.kill("SIGKILL"), 5000);
out.agent_exit = await exited;
clearTimeout(killer);
clearTimeout(timer);
if (failure) out.failure = failure;
process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(failure ? 1 : 0));

// An ACP v2 client written with the official TypeScript SDK's `@agentclientprotocol/sdk/experimental/v2`
// (2.4.0+), loaded from the folder named by ACP_TS_SDK_DIR, driving any v2 agent given as a command,
// by a plan: the same plan language and the same JSON lines as sdk_v2_client.py (read its
// docstring), so a test can run either client on either agent.
//
// Usage: node ts_v2_client.mjs PLAN -- AGENT_COMMAND...
//
// The SDK's own client API is used: `client()` with a session/request_permission and a
// session/update handler, `ctx.buildSession(cwd).start()` (an ActiveSession) and its `prompt()`;
// a prompt is withdrawn by aborting its `cancellationSignal` (the SDK sends $/cancel_request and
// keeps waiting for the answer). A permission request the agent withdraws ($/cancel_request)
// aborts the handler's `signal`: this client then answers the `cancelled` outcome.

import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const require = createRequire(path.join(process.env.ACP_TS_SDK_DIR, "package.json"));
const v2 = await import(pathToFileURL(require.resolve("@agentclientprotocol/sdk/experimental/v2")).href);

const separator = process.argv.indexOf("--");
const plan = JSON.parse(process.argv[2]);
const command = process.argv.slice(separator + 1);
const T0 = performance.now();
const now = () => Math.round(performance.now() - T0) / 1000;
const log = (...parts) => console.error("ts_v2_client:", ...parts);
const emit = (record) => process.stdout.write(JSON.stringify(record) + "\n");

class Failure extends Error {}

// Everything the SDK handed this client, and every message through its stream.
const seen = { wire: [], updates: [], permissions: [] };
let waiters = [];
const poke = () => {
  const woken = waiters;
  waiters = [];
  for (const wake of woken) wake();
};

async function until(predicate, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = predicate();
    if (found) return found;
    const remaining = deadline - Date.now();
    if (remaining <= 0) throw new Failure(`timed out after ${timeoutMs / 1000}s waiting for ${what}`);
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, remaining);
      waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}

function tap(stream) {
  const record = (d) =>
    new TransformStream({
      transform(message, controller) {
        const entry = { ev: "wire", d, t: now(), m: message };
        seen.wire.push(entry);
        emit(entry);
        poke();
        controller.enqueue(message);
      },
    });
  const outgoing = record("out");
  void outgoing.readable.pipeTo(stream.writable).catch(() => {});
  return { writable: outgoing.writable, readable: stream.readable.pipeThrough(record("in")) };
}

const outgoing = (method) => seen.wire.filter((e) => e.d === "out" && e.m.method === method).map((e) => e.m);
const answerTo = (id) => seen.wire.find((e) => e.d === "in" && !("method" in e.m) && e.m.id === id)?.m;

const matches = (update, kind) =>
  ["idle", "running", "requires_action"].includes(kind)
    ? update.sessionUpdate === "state_update" && update.state === kind
    : update.sessionUpdate === kind;

const app = v2
  .client({ name: "ts-v2-plan-client" })
  .onNotification(v2.methods.client.session.update, ({ params }) => {
    seen.updates.push(params.update);
    emit({ ev: "update", t: now(), u: params.update });
    poke();
  })
  .onRequest(v2.methods.client.session.requestPermission, ({ params, signal, requestId }) => {
    const permission = { n: seen.permissions.length + 1, id: requestId, params, seenByPlan: false, done: false };
    seen.permissions.push(permission);
    emit({ ev: "permission", n: permission.n, id: requestId, request: params });
    poke();
    return new Promise((resolve) => {
      permission.answer = (response) => {
        permission.done = true;
        emit({ ev: "permission_answer", n: permission.n, response });
        resolve(response);
      };
      signal.addEventListener(
        "abort",
        () => {
          if (permission.done) return;
          // The agent withdrew it ($/cancel_request): v2 asks for the `cancelled` outcome.
          permission.done = true;
          emit({ ev: "permission_withdrawn", n: permission.n });
          poke();
          resolve({ outcome: { outcome: "cancelled" } });
        },
        { once: true },
      );
    });
  });

const state = { session: null, prompts: new Map(), cursor: 0, child: null, exited: null };

function startAgent() {
  const child = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"], env: process.env });
  state.child = child;
  state.exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve(signal ?? code)));
  return tap(v2.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout)));
}

async function stopAgent() {
  const killer = setTimeout(() => {
    log("the agent did not exit within 10 s of its stdin closing: killing it");
    state.child.kill("SIGKILL");
  }, 10000);
  const code = await state.exited;
  clearTimeout(killer);
  return typeof code === "number" ? code : null;
}

async function step(ctx, i, s) {
  const timeout = 1000 * (s.timeout ?? 30);
  const sessionId = state.session?.sessionId;
  switch (s.op) {
    case "initialize": {
      const result = await ctx.request(v2.methods.agent.initialize, {
        protocolVersion: s.protocolVersion ?? v2.PROTOCOL_VERSION,
        info: { name: "ts-v2-plan-client", version: "0" },
        capabilities: {},
      });
      emit({ ev: "result", i, result });
      return;
    }
    case "new_session": {
      state.session = await ctx.buildSession(s.cwd ?? process.cwd()).start();
      emit({ ev: "result", i, result: state.session.newSessionResponse });
      return;
    }
    case "set_config": {
      const result = await state.session.setConfigOption({ configId: s.configId, type: "id", value: s.value });
      emit({ ev: "result", i, result });
      return;
    }
    case "close_session": {
      const result = await ctx.request(v2.methods.agent.session.close, { sessionId });
      emit({ ev: "result", i, result });
      return;
    }
    case "resume": {
      const result = await ctx.request(v2.methods.agent.session.resume, {
        sessionId,
        cwd: s.cwd ?? process.cwd(),
        ...(s.mcpServers ? { mcpServers: s.mcpServers } : {}), // optional in v2: sent only if asked
        ...(s.replay ? { replayFrom: { type: "start" } } : {}),
      });
      // The session's helper on this connection (after a restart, the old one's is closed).
      state.session.dispose();
      state.session = ctx.attachSession({ ...result, sessionId });
      emit({ ev: "result", i, result });
      return;
    }
    case "prompt": {
      const controller = new AbortController();
      const prompt = { controller, id: undefined };
      state.prompts.set(s.as, prompt);
      state.session.prompt(s.text, { cancellationSignal: controller.signal }).then(
        (result) => emit({ ev: "prompt_settled", as: s.as, result }),
        (error) => emit({ ev: "prompt_settled", as: s.as, error: { code: error?.code ?? null, message: String(error?.message ?? error) } }),
      );
      const known = new Set([...state.prompts.values()].map((p) => p.id));
      prompt.id = await until(
        () => outgoing(v2.methods.agent.session.prompt).map((m) => m.id).find((id) => !known.has(id)),
        timeout,
        `prompt ${s.as} to go out`,
      );
      emit({ ev: "prompt_sent", as: s.as, id: prompt.id });
      return;
    }
    case "await_prompt": {
      const { id } = state.prompts.get(s.as);
      await until(() => answerTo(id), timeout, `the answer to prompt ${s.as}`);
      return;
    }
    case "withdraw":
      state.prompts.get(s.as).controller.abort();
      return;
    case "cancel":
      await ctx.notify(v2.methods.agent.session.cancel, { sessionId });
      return;
    case "wait_update": {
      const count = s.count ?? 1;
      await until(
        () => {
          let found = 0;
          for (let index = state.cursor; index < seen.updates.length; index++) {
            if (matches(seen.updates[index], s.kind) && ++found === count) {
              state.cursor = index + 1;
              return true;
            }
          }
          return false;
        },
        timeout,
        `${count} ${s.kind} update(s)`,
      );
      return;
    }
    case "wait_permission": {
      const permission = await until(
        () => seen.permissions.find((p) => !p.seenByPlan && !p.done),
        timeout,
        "a permission request",
      );
      permission.seenByPlan = true;
      return;
    }
    case "answer_permission": {
      const permission = seen.permissions.find((p) => !p.done);
      if (!permission) throw new Failure("no pending permission request to answer");
      if (s.option === "cancelled") {
        permission.answer({ outcome: { outcome: "cancelled" } });
      } else {
        const option = permission.params.options.find((o) => o.kind.startsWith(s.option));
        permission.answer({ outcome: { outcome: "selected", optionId: option.optionId } });
      }
      return;
    }
    default:
      throw new Failure(`unknown step ${s.op}`);
  }
}

// One connection per agent process; `restart` ends it and starts the next.
async function runFrom(start) {
  let resume = null;
  const stream = startAgent();
  await app.connectWith(stream, async (ctx) => {
    for (let i = start; i < plan.length; i++) {
      emit({ ev: "step", i, step: plan[i] });
      if (plan[i].op === "restart") {
        resume = i;
        return;
      }
      await step(ctx, i, plan[i]);
    }
  });
  state.child.stdin.end(); // the connection is closed: the agent reads end of input
  if (resume === null) return;
  const code = await stopAgent();
  emit({ ev: "result", i: resume, agent_exit: code });
  // A new connection: its request ids start again.
  seen.wire.length = 0;
  state.prompts.clear();
  await runFrom(resume + 1);
}

let failure = null;
const timer = setTimeout(() => {
  failure = "the plan did not finish within 120 s";
  state.child?.kill("SIGKILL");
}, 120000);
try {
  await runFrom(0);
} catch (error) {
  failure = error instanceof Failure ? error.message : String(error?.stack ?? error);
}
clearTimeout(timer);
for (const prompt of state.prompts.values()) prompt.controller.abort();
state.child?.stdin.end();
const code = state.child ? await stopAgent() : null;
process.stdout.write(JSON.stringify({ ev: "end", failure, agent_exit: code }) + "\n", () =>
  process.exit(failure ? 1 : 0),
);

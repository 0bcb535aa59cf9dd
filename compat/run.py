#!/usr/bin/env python3
"""The compatibility run: ``acp-driver check`` against real agents, into docs/compatibility.md.

    python3 compat/run.py [--cache DIR] [--only NAME,...] [--timeout SEC] [--out FILE] [--latest]

1. installs each agent from its registry (npm) at the pinned version into ``--cache``
   (default ``compat/.cache``, or ``$ACP_COMPAT_CACHE``; reused when the version is there);
2. starts ``compat/fake_model.py`` on 127.0.0.1: a streaming stand-in for the Anthropic, Gemini
   and OpenAI (Responses) HTTP APIs, so no account, key or network is needed;
3. runs ``python -m acp_driver check --json`` against each agent, each with a fresh HOME in the
   cache, its API pointed at the stand-in, in a scratch directory;
4. writes the verdicts, every deviation with its evidence, and what each agent needed, to
   ``--out`` (default docs/compatibility.md) and the raw documents to ``<cache>/results.json``.

Exit status: 0 when every selected agent was installed and audited (whatever its verdict), 1 when
one could not be, 2 on an environment problem (no npm).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FAKE_MODEL = Path(__file__).resolve().with_name("fake_model.py")

BUSY_PROMPT = "Write a long essay about Unix pipes."
PERMISSION_PROMPT = "Create a file named x.txt."
QUICK_PROMPT = "Say hello."
PERMISSION_RULE = "cancel while a permission request is pending ends the prompt cancelled"


@dataclass
class Agent:
    name: str
    package: str
    version: str
    bin: str
    args: list[str]
    api: str
    """Which HTTP API it talks: anthropic, gemini or openai."""
    registry: str = "npm"
    """npm, or pypi (installed into its own virtual environment in the cache)."""
    python: tuple[int, int] = (3, 11)
    """For a PyPI agent: the oldest Python it installs on."""
    check_args: list[str] = field(default_factory=list)
    timeout: float | None = None
    """``check --timeout`` for this agent, when it needs more than the run's ``--timeout``."""
    setup: list[str] = field(default_factory=list)
    """What the run does to make it work, for the doc (kept next to the code that does it)."""


AGENTS = [
    Agent(
        name="claude-agent-acp",
        package="@agentclientprotocol/claude-agent-acp",
        version="0.101.0",
        bin="claude-agent-acp",
        args=[],
        api="anthropic",
        check_args=["--mode", "default"],
        setup=[
            "`ANTHROPIC_BASE_URL` points at the stand-in, `ANTHROPIC_API_KEY` is a dummy.",
            '`--mode default` ("Manual": always ask), so that the permission probe is asked.',
        ],
    ),
    Agent(
        name="gemini-cli",
        package="@google/gemini-cli",
        version="0.61.0",
        bin="gemini",
        args=["--experimental-acp"],
        api="gemini",
        check_args=["--auth", "gemini-api-key"],
        setup=[
            "`GOOGLE_GEMINI_BASE_URL` points at the stand-in, `GEMINI_API_KEY` is a dummy.",
            "`--auth gemini-api-key`: `session/new` needs an `authenticate` first.",
        ],
    ),
    Agent(
        name="codex-acp",
        package="@zed-industries/codex-acp",
        version="0.16.0",
        bin="codex-acp",
        args=[],
        api="openai",
        check_args=["--auth", "openai-api-key", "--mode", "read-only"],
        setup=[
            "`CODEX_HOME/config.toml` declares a model provider at the stand-in (Responses API) and "
            "model `gpt-5.4`; `OPENAI_API_KEY` is a dummy.",
            "`--auth openai-api-key`; `--mode read-only` (approval needed to edit files).",
        ],
    ),
    Agent(
        name="fast-agent",
        package="fast-agent-mcp",
        version="0.10.48",
        bin="fast-agent",
        args=["--no-update-check", "acp", "--model", "haiku", "--shell"],
        api="anthropic",
        registry="pypi",
        python=(3, 13),
        check_args=["--terminal"],
        timeout=20.0,
        setup=[
            "Installed from PyPI into its own virtual environment (it needs Python >= 3.13).",
            "`--model haiku` (Anthropic API: `ANTHROPIC_BASE_URL` at the stand-in, a dummy key); "
            "`--shell` gives it a shell tool for the permission probe.",
            "`--terminal`: the audit offers it real terminals (it asks permission only when the "
            "client has them).",
            "`--timeout 20`: it takes 6-7 s to answer `initialize` on an idle machine (its imports), "
            "more than 10 s on a loaded one.",
        ],
    ),
]


def log(message: str) -> None:
    sys.stderr.write(f"compat: {message}\n")
    sys.stderr.flush()


# ---------------------------------------------------------------------- install


def installed_version(prefix: Path, package: str) -> str | None:
    manifest = prefix / "node_modules" / package / "package.json"
    try:
        version: str = json.loads(manifest.read_text())["version"]
        return version
    except (OSError, ValueError, KeyError):
        return None


def install(agents: list[Agent], cache: Path, latest: bool, python: str | None) -> dict[str, str]:
    """Install the agents into the cache; returns the installed version of each ("" if not)."""
    versions = install_npm([a for a in agents if a.registry == "npm"], cache, latest)
    for agent in agents:
        if agent.registry == "pypi":
            versions[agent.name] = install_pypi(agent, cache, latest, python)
    return versions


def find_python(minimum: tuple[int, int], given: str | None) -> str | None:
    """An interpreter that runs and is at least ``minimum``: ``given``, on PATH, or under pyenv."""
    candidates = [given] if given else []
    candidates += [f"python3.{minor}" for minor in range(minimum[1] + 3, minimum[1] - 1, -1)]
    pyenv = shutil.which("pyenv")
    if pyenv is not None:
        root = subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip()
        candidates += sorted(str(p) for p in Path(root).glob("versions/3.*/bin/python3"))[::-1]
    check = f"import sys; sys.exit(0 if sys.version_info >= {minimum!r} else 1)"
    for candidate in candidates:
        path = shutil.which(candidate) or candidate
        try:
            if subprocess.run([path, "-c", check], capture_output=True, timeout=30).returncode == 0:
                return path
        except OSError:
            continue
    return None


def install_pypi(agent: Agent, cache: Path, latest: bool, python: str | None) -> str:
    venv = cache / "pypi" / agent.name
    pip = venv / "bin" / "pip"
    spec = agent.package if latest else f"{agent.package}=={agent.version}"
    if not pip.exists():
        interpreter = find_python(agent.python, python)
        if interpreter is None:
            log(f"{agent.name}: no Python >= {agent.python[0]}.{agent.python[1]} found (--python)")
            return ""
        subprocess.run([interpreter, "-m", "venv", str(venv)], check=True, timeout=300)
    shown = subprocess.run([str(pip), "show", agent.package], capture_output=True, text=True)
    current = next((ln.split()[1] for ln in shown.stdout.splitlines() if ln.startswith("Version:")), "")
    if latest or current != agent.version:
        log(f"pip install {spec}")
        result = subprocess.run(
            [str(pip), "install", "-q", spec], capture_output=True, text=True, timeout=1800
        )
        if result.returncode != 0:
            log(result.stderr[-2000:])
        shown = subprocess.run([str(pip), "show", agent.package], capture_output=True, text=True)
        current = next((ln.split()[1] for ln in shown.stdout.splitlines() if ln.startswith("Version:")), "")
    return current


def agent_binary(agent: Agent, cache: Path) -> Path:
    if agent.registry == "pypi":
        return cache / "pypi" / agent.name / "bin" / agent.bin
    return cache / "npm" / "node_modules" / ".bin" / agent.bin


def install_npm(agents: list[Agent], cache: Path, latest: bool) -> dict[str, str]:
    """npm-install the agents into ``cache/npm``; returns the installed version of each."""
    prefix = cache / "npm"
    prefix.mkdir(parents=True, exist_ok=True)
    if not agents:
        return {}
    wanted = [a for a in agents if latest or installed_version(prefix, a.package) != a.version]
    if wanted:
        specs = [f"{a.package}@{'latest' if latest else a.version}" for a in wanted]
        log(f"npm install {' '.join(specs)}")
        result = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix), *specs],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if result.returncode != 0:
            log(result.stderr[-2000:])
    return {a.name: installed_version(prefix, a.package) or "" for a in agents}


# ---------------------------------------------------------------------- the stand-in model


class FakeModel:
    def __init__(self, log_path: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(FAKE_MODEL), "--port", "0", "--busy-seconds", "60", "--log", str(log_path)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("PORT "):
            self.process.kill()
            raise RuntimeError(f"the stand-in model did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def agent_env(agent: Agent, home: Path, model: FakeModel) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "SYSTEMROOT")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "NO_COLOR": "1",
            "PYTHONPATH": str(ROOT / "src"),
        }
    )
    if agent.api == "anthropic":
        env.update(
            {
                "ANTHROPIC_BASE_URL": model.url,
                "ANTHROPIC_API_KEY": "sk-ant-stand-in",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
            }
        )
    elif agent.api == "gemini":
        env.update({"GOOGLE_GEMINI_BASE_URL": model.url, "GEMINI_API_KEY": "stand-in"})
    elif agent.api == "openai":
        codex_home = home / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(
            'model = "gpt-5.4"\n'
            'model_provider = "standin"\n\n'
            "[model_providers.standin]\n"
            'name = "stand-in"\n'
            f'base_url = "{model.url}/v1"\n'
            'wire_api = "responses"\n'
            'env_key = "OPENAI_API_KEY"\n'
        )
        env.update({"CODEX_HOME": str(codex_home), "OPENAI_API_KEY": "sk-stand-in"})
    return env


# ---------------------------------------------------------------------- the audit


def audit(
    agent: Agent, cache: Path, model: FakeModel, timeout: float, check_args: list[str]
) -> dict[str, Any]:
    home = cache / "home" / agent.name
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    scratch = cache / "scratch" / agent.name
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    binary = agent_binary(agent, cache)
    command = [
        sys.executable,
        "-m",
        "acp_driver",
        "check",
        "--json",
        "--timeout",
        f"{timeout:g}",
        "--busy-prompt",
        BUSY_PROMPT,
        "--permission-prompt",
        PERMISSION_PROMPT,
        "--quick-prompt",
        QUICK_PROMPT,
        *check_args,
        "--",
        str(binary),
        *agent.args,
    ]
    started = time.monotonic()
    result = subprocess.run(
        command,
        cwd=scratch,
        env=agent_env(agent, home, model),
        capture_output=True,
        text=True,
        timeout=timeout * 80 + 120,
    )
    try:
        document: dict[str, Any] = json.loads(result.stdout)
    except ValueError:
        document = {"verdict": "error", "error": (result.stderr or result.stdout)[-1000:]}
    document["exitCode"] = result.returncode
    document["seconds"] = round(time.monotonic() - started, 1)
    document["checkArgs"] = [
        "--timeout",
        f"{timeout:g}",
        "--busy-prompt",
        BUSY_PROMPT,
        "--permission-prompt",
        PERMISSION_PROMPT,
        "--quick-prompt",
        QUICK_PROMPT,
        *check_args,
    ]
    document["command"] = [agent.bin, *agent.args]
    return document


# ---------------------------------------------------------------------- where the tool runs


def where_tools_run(agent: Agent, cache: Path, model: FakeModel, check_args: list[str]) -> dict[str, Any]:
    """The permission prompt outside the audit: the agent process starts in one directory, its
    session's cwd is another, and every permission request is answered with its reject option.
    Says whether the agent asked, and where ``touch x.txt`` ran (if it did)."""
    base = cache / "scratch" / f"{agent.name}-tools"
    shutil.rmtree(base, ignore_errors=True)
    own, session = base / "process", base / "session"
    own.mkdir(parents=True)
    session.mkdir()
    home = cache / "home" / f"{agent.name}-tools"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    process = subprocess.Popen(
        [str(agent_binary(agent, cache)), *agent.args],
        cwd=own,
        env=agent_env(agent, home, model),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    incoming: queue.Queue[dict[str, Any] | None] = queue.Queue()

    def read() -> None:
        for line in stdout:
            with contextlib.suppress(ValueError):
                incoming.put(json.loads(line))
        incoming.put(None)

    threading.Thread(target=read, daemon=True).start()
    asked: list[str] = []

    def send(message: dict[str, Any]) -> None:
        stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
        stdin.flush()

    def request(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        send({"id": rid, "method": method, "params": params})
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                message = incoming.get(timeout=1)
            except queue.Empty:
                continue
            if message is None:
                raise RuntimeError("the agent closed its output")
            if message.get("method") == "session/request_permission" and "id" in message:
                options = message.get("params", {}).get("options", [])
                reject = next((o for o in options if str(o.get("kind", "")).startswith("reject")), None)
                asked.append(str(reject.get("optionId")) if reject else "cancelled")
                outcome = (
                    {"outcome": "selected", "optionId": reject["optionId"]}
                    if reject
                    else {"outcome": "cancelled"}
                )
                send({"id": message["id"], "result": {"outcome": outcome}})
            elif "method" in message and "id" in message:
                send({"id": message["id"], "error": {"code": -32601, "message": "Method not found"}})
            elif message.get("id") == rid and "method" not in message:
                return message
        raise RuntimeError(f"no answer to {method}")

    def option(name: str) -> str | None:
        return check_args[check_args.index(name) + 1] if name in check_args else None

    outcome: str
    try:
        request(
            1,
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {
                    "fs": {"readTextFile": False, "writeTextFile": False},
                    # As the audit: terminals offered with --terminal (their requests are refused
                    # here; this probe only watches whether the agent asks, and where it runs).
                    "terminal": "--terminal" in check_args,
                },
            },
        )
        if option("--auth"):
            request(2, "authenticate", {"methodId": option("--auth")})
        sid = request(3, "session/new", {"cwd": str(session), "mcpServers": []})["result"]["sessionId"]
        if option("--mode"):
            request(4, "session/set_mode", {"sessionId": sid, "modeId": option("--mode")})
        answer = request(
            5, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": PERMISSION_PROMPT}]}
        )
        outcome = (
            f"stopReason {answer.get('result', {}).get('stopReason')!r}"
            if "result" in answer
            else f"error {answer.get('error')}"
        )
    except (RuntimeError, KeyError, TypeError) as exc:
        outcome = f"the probe broke off: {exc}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    ran = [
        label
        for label, where in (("the session's cwd", session), ("its own working directory", own))
        if (where / "x.txt").exists()
    ]
    return {"asked": asked, "ran": ran, "outcome": outcome, "mode": option("--mode")}


def describe_tools(found: dict[str, Any]) -> str:
    mode = f" in mode `{found['mode']}`" if found.get("mode") else " in its default mode"
    asked = (
        "asked permission (answered with its reject option)" if found["asked"] else "did not ask permission"
    )
    ran = (
        f"`touch x.txt` ran in {' and '.join(found['ran'])}" if found["ran"] else "`touch x.txt` did not run"
    )
    return (
        f"Permission prompt outside the audit{mode}, the process started in one directory and the "
        f"session's cwd another: the agent {asked}; {ran}; the turn ended with {found['outcome']}."
    )


# ---------------------------------------------------------------------- the doc


def cell(result: str) -> str:
    return {"pass": "PASS", "fail": "**FAIL**", "skip": "SKIP"}.get(result, result)


def md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def findings(agents: list[Agent], documents: dict[str, dict[str, Any]]) -> list[str]:
    """The agents' bugs and deviations, one line each, derived from this run's results."""
    lines: list[str] = []
    for a in agents:
        doc = documents[a.name]
        if doc.get("verdict") == "error":
            lines.append(f"- {a.name}: could not be audited: `{md_escape(str(doc.get('error')))}`")
            continue
        for r in doc.get("results", []):
            if r["result"] == "fail" and r["level"] in ("MUST", "SHOULD", "MAY"):
                lines.append(f"- {a.name} ({r['level']}): {md_escape(r['rule'])}: {md_escape(r['evidence'])}")
        for key, how in (("tools", ""), ("toolsDefaultMode", " in its default mode")):
            tools = doc.get(key)
            if not tools:
                continue
            if not tools["asked"] and tools["ran"]:
                lines.append(f"- {a.name}: ran its shell tool{how} without asking permission")
            if "its own working directory" in tools["ran"]:
                lines.append(
                    f"- {a.name}: ran its shell tool in its own working directory, not in the session's `cwd`"
                )
            if tools["asked"] and tools["outcome"] == "stopReason 'cancelled'":
                lines.append(
                    f"- {a.name}: a permission answered with its reject option (`{tools['asked'][0]}`) ended "
                    "the turn with stopReason `cancelled`, though the client never cancelled it"
                )
    unique = list(dict.fromkeys(lines))  # a mode given may be the default mode: the same finding twice
    return unique or ["None: every agent passed every rule."]


def render(
    agents: list[Agent],
    documents: dict[str, dict[str, Any]],
    versions: dict[str, str],
    extra: dict[str, list[str]],
    node: str,
) -> str:
    from acp_driver import __version__

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        "# Compatibility: `acp-driver check` against real agents",
        "",
        f"<!-- generated by compat/run.py on {now}; do not edit by hand: run it again -->",
        "",
        f"Generated by `python3 compat/run.py` on {now} (acp-driver {__version__}, node {node}). Each agent "
        "is installed from npm or PyPI at the version below, started with a fresh `HOME`, and pointed at "
        "`compat/fake_model.py` on 127.0.0.1: a streaming stand-in for the Anthropic, Gemini and OpenAI "
        "(Responses) HTTP APIs. It is not a model: for the busy prompt it streams text for a minute, for "
        "the permission prompt it calls the agent's own shell tool (`touch x.txt`), for anything else "
        "it answers at once. So the audit has a real turn to cancel and a real permission request to "
        "hold, with no account, key or network.",
        "",
        "The verdicts are `acp-driver check --json` as run (see [cli.md](cli.md#check) for the rules). "
        "A deviation is an agent's behaviour, not a bug of ours; SKIP means the rule could not be "
        "tested against that agent. Re-run with `python3 compat/run.py`; the opt-in test "
        "`ACP_COMPAT=1 pytest tests/compat` runs it too. Only the agents below were run; others "
        "(gptme, the SDK examples) are not covered here yet.",
        "",
    ]
    out += [
        "## Findings",
        "",
        "Derived from the results below: every failed rule, and what the permission probe outside the "
        "audit showed (an agent that runs tools without asking in its default mode is not breaking the "
        "spec, but a host that wants to be asked has to set a mode).",
        "",
        *findings(agents, documents),
        "",
        "## Verdicts",
        "",
    ]
    header = "| Rule | Level | " + " | ".join(f"{a.name} {versions.get(a.name, '')}" for a in agents) + " |"
    out += [header, "|---|---|" + "---|" * len(agents)]
    rules: list[tuple[str, str]] = []
    for a in agents:
        for r in documents[a.name].get("results", []):
            if (r["rule"], r["level"]) not in rules:
                rules.append((r["rule"], r["level"]))
    for rule, level in rules:
        row = [md_escape(rule), level]
        for a in agents:
            found = [r for r in documents[a.name].get("results", []) if r["rule"] == rule]
            row.append(cell(found[0]["result"]) if found else "—")
        out.append("| " + " | ".join(row) + " |")
    verdicts = [
        f"{documents[a.name].get('verdict')} (exit {documents[a.name].get('exitCode')})" for a in agents
    ]
    out.append("| **verdict** | | " + " | ".join(verdicts) + " |")
    out.append("")
    for a in agents:
        doc = documents[a.name]
        info = doc.get("agentInfo") or {}
        out += [
            f"## {a.name}",
            "",
            f"- package: `{a.package}@{versions.get(a.name) or '?'}` ({a.registry}); reports itself as "
            f"`{info.get('name', '?')}` {info.get('version', '?')}",
            f"- command: `{' '.join(doc.get('command', []))}`",
            f"- check options: `{' '.join(_quote(x) for x in doc.get('checkArgs', []))}`",
            f"- verdict: **{doc.get('verdict')}**, exit {doc.get('exitCode')}, {doc.get('seconds')} s",
            "",
            "What the run needed:",
            "",
            *[f"- {line}" for line in a.setup],
            "",
        ]
        if doc.get("verdict") == "error":
            out += [f"The audit could not run: `{md_escape(str(doc.get('error')))}`", ""]
            continue
        deviations = [r for r in doc.get("results", []) if r["result"] != "pass"]
        if deviations:
            out += ["Deviations (every rule that did not pass):", ""]
            for r in deviations:
                out.append(f"- {cell(r['result'])} {r['level']} {md_escape(r['rule'])}")
        else:
            out.append("No deviation: every rule passed.")
        out += ["", "Evidence, rule by rule:", ""]
        for r in doc.get("results", []):
            out.append(f"- {cell(r['result'])} {md_escape(r['rule'])}: {md_escape(r['evidence'])}")
        out.append("")
        for line in extra.get(a.name, []):
            out += [line, ""]
    return "\n".join(out).rstrip() + "\n"


def _quote(arg: str) -> str:
    return f'"{arg}"' if " " in arg else arg


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--cache", default=os.environ.get("ACP_COMPAT_CACHE", str(ROOT / "compat" / ".cache"))
    )
    parser.add_argument("--only", default=None, help="comma-separated agent names")
    parser.add_argument("--timeout", type=float, default=10.0, help="check --timeout (default 10)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "compatibility.md"))
    parser.add_argument(
        "--latest", action="store_true", help="install the latest versions, not the pinned ones"
    )
    parser.add_argument(
        "--python", default=None, help="the interpreter for PyPI agents that need a newer one"
    )
    opts = parser.parse_args()
    if shutil.which("npm") is None or shutil.which("node") is None:
        log("npm and node are needed")
        return 2
    agents = AGENTS
    if opts.only:
        names = set(opts.only.split(","))
        agents = [a for a in AGENTS if a.name in names]
    cache = Path(opts.cache).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    versions = install(agents, cache, opts.latest, opts.python)
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    model = FakeModel(cache / "fake-model.log")
    documents: dict[str, dict[str, Any]] = {}
    extra: dict[str, list[str]] = {}
    try:
        for agent in agents:
            if not versions.get(agent.name):
                documents[agent.name] = {"verdict": "error", "error": "not installed", "exitCode": None}
                continue
            log(f"auditing {agent.name} {versions[agent.name]}")
            timeout = max(opts.timeout, agent.timeout or 0.0)
            documents[agent.name] = audit(agent, cache, model, timeout, agent.check_args)
            log(f"{agent.name}: {documents[agent.name].get('verdict')}")
            tools = where_tools_run(agent, cache, model, agent.check_args)
            documents[agent.name]["tools"] = tools
            extra.setdefault(agent.name, []).append(describe_tools(tools))
            if "--mode" in agent.check_args:
                # What the permission rules do in the session's own default mode, for the doc.
                at = agent.check_args.index("--mode")
                bare = audit(agent, cache, model, timeout, agent.check_args[:at] + agent.check_args[at + 2 :])
                found = [r for r in bare.get("results", []) if r["rule"] == PERMISSION_RULE]
                what = f"{found[0]['result'].upper()}: {found[0]['evidence']}" if found else bare.get("error")
                extra[agent.name].append(
                    f"Without `--mode` (the session's default mode), the permission rule was {md_escape(str(what))}"
                )
                bare_tools = where_tools_run(
                    agent, cache, model, agent.check_args[:at] + agent.check_args[at + 2 :]
                )
                documents[agent.name]["toolsDefaultMode"] = bare_tools
                extra[agent.name].append(describe_tools(bare_tools))
    finally:
        model.close()
    (cache / "results.json").write_text(json.dumps({"versions": versions, "documents": documents}, indent=2))
    Path(opts.out).write_text(render(agents, documents, versions, extra, node))
    log(f"wrote {opts.out}")
    return 0 if all(d.get("verdict") != "error" for d in documents.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

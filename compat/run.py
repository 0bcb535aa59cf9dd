#!/usr/bin/env python3
"""The compatibility run: ``acp-driver check`` against real agents, into docs/compatibility.md.

    python3 compat/run.py [--cache DIR] [--only NAME,...] [--timeout SEC] [--out FILE] [--latest]
                          [--protocol 1|2]

1. installs each agent from its registry (npm or PyPI) at the pinned version into ``--cache``
   (default ``compat/.cache``, or ``$ACP_COMPAT_CACHE``; reused when the version is there);
2. starts ``compat/fake_model.py`` on 127.0.0.1: a streaming stand-in for the Anthropic, Gemini
   and OpenAI (Responses, Chat Completions) HTTP APIs, so no account, key or network is needed;
3. runs ``python -m acp_driver check --json`` against each agent, each with a fresh HOME in the
   cache, its API pointed at the stand-in, in a scratch directory;
4. writes the verdicts, every deviation with its evidence, and what each agent needed, to
   ``--out`` (default docs/compatibility.md) and the raw documents to ``<cache>/results.json``.

``--protocol 2`` audits the agents that speak ACP v2 (``AGENTS_V2``: claude-agent-acp in its v2
mode, and the test suite's v2 peer agents on the official SDKs) by the v2 rules, and rewrites only
the doc's "ACP v2" section (between its markers); the default run (``--protocol 1``, ``AGENTS``)
rewrites the rest and keeps that section as it was.

The run is four modules, one concept each: ``agents.py`` (which agents, how each is installed,
started and pointed at the stand-in), ``probes.py`` (what the run asks an agent beside the audit:
what ``--protocol auto`` settles, where its tools run), ``report.py`` (the doc) and this one (the
audit and the command line).

Exit status: 0 when every selected agent was installed and audited (whatever its verdict), 1 when
one could not be, 2 on an environment problem (no npm).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agents import (
    AGENTS,
    AGENTS_V2,
    BUSY_PROMPT,
    PERMISSION_PROMPT,
    PERMISSION_RULE,
    QUICK_PROMPT,
    ROOT,
    Agent,
    FakeModel,
    agent_command,
    agent_env,
    install,
    log,
)
from probes import describe_tools, negotiation, where_tools_run
from report import md_escape, render, render_v2, v2_section, with_v2_section

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
    prompts = {
        "--busy-prompt": BUSY_PROMPT,
        "--permission-prompt": PERMISSION_PROMPT,
        "--quick-prompt": QUICK_PROMPT,
    }
    rest = list(check_args)
    for flag in prompts:  # an agent's own prompts (a scripted peer's commands) replace the run's
        if flag in rest:
            at = rest.index(flag)
            prompts[flag] = rest[at + 1]
            del rest[at : at + 2]
    options = ["--protocol", str(agent.protocol), "--timeout", f"{timeout:g}"]
    options += [part for pair in prompts.items() for part in pair] + rest
    command = [
        sys.executable,
        "-m",
        "acp_driver",
        "check",
        "--json",
        *options,
        "--",
        *agent_command(agent, cache),
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
    document["checkArgs"] = options
    shown = [str(Path(a).relative_to(ROOT)) if a.startswith(str(ROOT)) else a for a in agent.args]
    document["command"] = [agent.interpreter or agent.bin, *shown]
    return document


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
    parser.add_argument(
        "--protocol",
        choices=("1", "2"),
        default="1",
        help="1: the agents by the v1 rules (the doc but its ACP v2 section); 2: the v2 agents by the "
        "v2 rules (only that section)",
    )
    opts = parser.parse_args()
    if shutil.which("npm") is None or shutil.which("node") is None:
        log("npm and node are needed")
        return 2
    every = AGENTS_V2 if opts.protocol == "2" else AGENTS
    agents = every
    if opts.only:
        names = set(opts.only.split(","))
        agents = [a for a in every if a.name in names]
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
            if agent.protocol == 2:
                continue  # the probes below speak v1
            documents[agent.name]["negotiation"] = negotiation(agent, cache, model)
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
    results = "results-v2.json" if opts.protocol == "2" else "results.json"
    (cache / results).write_text(json.dumps({"versions": versions, "documents": documents}, indent=2))
    out = Path(opts.out)
    before = out.read_text() if out.exists() else ""
    if opts.protocol == "2":
        out.write_text(with_v2_section(before, render_v2(agents, documents, versions, node)))
    else:
        kept = v2_section(before)
        text = render(agents, documents, versions, extra, node)
        out.write_text(with_v2_section(text, kept) if kept is not None else text)
    log(f"wrote {opts.out}")
    return 0 if all(d.get("verdict") != "error" for d in documents.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Project-level checks: the README's commands, CI wiring, lint and types, the public API."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.match(r"```sh\n(.*?)\n```", text, re.S)
    assert block, "the README must start with a sh block of set-up commands"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_readme_starts_with_exactly_two_commands() -> None:
    commands = readme_commands()
    assert len(commands) == 2
    main_job, tests = commands
    assert "acp-driver run" in main_job
    assert "pytest" in tests
    for command in commands:
        assert command.startswith("python3 -m venv .venv && ")


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert readme_commands()[1] in ci


@pytest.mark.parametrize("tool", ["ruff-check", "ruff-format", "mypy"])
def test_lint_and_types_are_clean(tool: str) -> None:
    bindir = Path(sys.executable).parent
    commands = {
        "ruff-check": [str(bindir / "ruff"), "check", "src", "tests", "benchmarks"],
        "ruff-format": [str(bindir / "ruff"), "format", "--check", "src", "tests", "benchmarks"],
        "mypy": [sys.executable, "-m", "mypy"],
    }
    result = subprocess.run(commands[tool], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


PACKAGES = (
    "acp_driver",
    "acp_driver.core",
    "acp_driver.aio",
    "acp_driver.driver",
    "acp_driver.agent",
    "acp_driver.services",
    "acp_driver.trace",
    "acp_driver.net",
    "acp_driver.remote",
    "acp_driver.proxy",
    "acp_driver.cli",
)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_exports_exactly_its_public_names(package: str) -> None:
    """``__all__`` is exactly the package's public names: each is there (lazy ones load), and
    nothing public is left out of it (a helper imported at the top would be)."""
    import inspect

    mod = __import__(package, fromlist=["__all__"])
    exported = mod.__all__
    assert len(set(exported)) == len(exported), f"{package}.__all__ has duplicates"
    for name in exported:
        assert getattr(mod, name) is not None, f"{package}.{name} is missing"
    public = {
        name
        for name, value in vars(mod).items()
        if not name.startswith("_") and not inspect.ismodule(value) and name != "annotations"
    }
    assert public <= set(exported), f"{package}: public but not in __all__: {sorted(public - set(exported))}"


def test_readme_main_job_works_in_a_fresh_environment(tmp_path: Path) -> None:
    """The README's first command, run as written in a fresh copy of the project (new venv)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout: cannot tell which files make the project")
    copy = tmp_path / "project"
    for name in listed.stdout.splitlines():
        source = ROOT / name
        if source.is_file():
            target = copy / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    main_job = readme_commands()[0]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["NO_COLOR"] = "1"
    result = subprocess.run(
        main_job, shell=True, cwd=copy, capture_output=True, text=True, timeout=600, env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "chunk 5/5" in result.stdout
    assert "turn completed" in result.stderr
    # Without the remote extra, a remote agent is refused with the command that installs it for
    # this copy (an editable checkout: the package is on no index), and that command works.
    refused = subprocess.run(
        [str(copy / ".venv" / "bin" / "acp-driver"), "run", "--agent", "ws://127.0.0.1:9/acp", "hi"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert refused.returncode == 1, refused.stderr
    hint = refused.stderr.strip().rpartition("needs the remote extra (")[2].partition("): ")[2]
    assert hint.endswith(f"-m pip install -e '{copy}[remote]'"), refused.stderr
    installed = subprocess.run(
        hint, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    imports = [str(copy / ".venv" / "bin" / "python"), "-c", "import hypercorn, httpx, websockets, h2"]
    assert subprocess.run(imports, capture_output=True, timeout=120, env=env).returncode == 0


PATH_IN_TEXT = re.compile(
    r"\b((?:tests|src|tools|benchmarks|compat|docs)/[\w./-]+\.(?:py|md|mjs|json|png))(?:::(\w+))?"
)


def test_the_docs_name_only_files_and_tests_that_exist() -> None:
    """Every repository path the docs, the README and CI name exists, and every test named as
    ``file::test`` is defined in that file."""
    texts = [ROOT / "README.md", ROOT / ".ci" / "run", *sorted((ROOT / "docs").glob("*.md"))]
    missing = []
    for text_path in texts:
        for match in PATH_IN_TEXT.finditer(text_path.read_text()):
            path, test = match.group(1).rstrip("."), match.group(2)
            if "/.work/" in path:
                continue  # a scratch file a documented command writes (gitignored), not a source
            target = ROOT / path
            if not target.exists():
                missing.append(f"{text_path.name}: {path}")
            elif test and not re.search(rf"def {test}\b", target.read_text()):
                missing.append(f"{text_path.name}: {path}::{test}")
    assert missing == []

"""``tools/mutations.py`` (its table: ``tools/mutation_table/``) stays runnable: every code snippet it mutates is still in the source once, and each mutant still compiles."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))  # tools/mutation_table/, which the runner imports
spec = importlib.util.spec_from_file_location("mutations", ROOT / "tools" / "mutations.py")
assert spec is not None
assert spec.loader is not None
mutations = importlib.util.module_from_spec(spec)
sys.modules["mutations"] = mutations  # dataclasses look their module up
spec.loader.exec_module(mutations)


@pytest.mark.parametrize("mutation", mutations.MUTATIONS, ids=lambda m: m.name)
def test_the_enforcing_code_is_there_once(mutation: object) -> None:
    source = (mutations.SRC / mutation.path).read_text()  # type: ignore[attr-defined]
    assert source.count(mutation.old) == 1, f"{mutation.name}: update tools/mutation_table/"  # type: ignore[attr-defined]
    # The mutant must still be Python: a syntax error would fail every test, "catching" nothing.
    compile(source.replace(mutation.old, mutation.new), mutation.path, "exec")  # type: ignore[attr-defined]
    for test in mutation.tests:  # type: ignore[attr-defined]
        path, _, name = test.partition("::")
        assert (ROOT / path).exists(), test
        if name:  # a test that is gone makes pytest fail to collect: no test failure, no catch
            function = name.split("::")[-1].split("[")[0]
            assert f"def {function}(" in (ROOT / path).read_text(), test

"""The shape of the code: floors that only point down, no import cycle, few loose modules, small files.

``.importlinter`` declares the floors; ``lint-imports`` checks every import of ``core`` and ``lab``,
those inside functions included. A cycle or an upward import then fails here, not in review.
"""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CYCLES_TOOL = ROOT.parent / "shared" / "tools" / "import_cycles.py"
MAX_LINES = 600  # a file may hold one whole concept up to this; no concept is split to fit it
MAX_PAGE_LINES = 200  # a page only wires widgets to core; more than this holds logic that belongs in lab/
MAX_LOOSE_CORE_MODULES = 6  # core/ is stage packages; only the base vocabulary stays loose


def _lint_imports_command() -> list[str]:
    script = Path(sys.executable).with_name("lint-imports")
    return [str(script)] if script.exists() else [sys.executable, "-m", "importlinter.cli"]


def test_import_linter_contracts_are_kept():
    result = subprocess.run([*_lint_imports_command(), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_the_floors_contract_is_the_one_declared():
    """The contract lint-imports checks names every stage package, lowest floor last."""
    config = (ROOT / ".importlinter").read_text(encoding="utf-8")
    layers = config.split("layers =", 1)[1].split("\n\n", 1)[0].split()
    named = {name for name in layers if name != "|"}
    stages = {f"core.{p.name}" for p in (ROOT / "core").iterdir() if (p / "__init__.py").is_file()}
    assert stages <= named, f"stage packages missing from the floors: {sorted(stages - named)}"
    assert layers[0] == "lab" and layers[-1] != "core.cli"


@pytest.mark.skipif(not CYCLES_TOOL.is_file(), reason="../shared/tools is not beside this checkout")
def test_no_import_cycle_by_a_second_reader():
    result = subprocess.run([sys.executable, str(CYCLES_TOOL), ".", "--packages=core,lab"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:]


def test_core_top_level_holds_at_most_six_loose_modules():
    loose = sorted(p.name for p in (ROOT / "core").glob("*.py"))
    assert len(loose) <= MAX_LOOSE_CORE_MODULES, loose


@pytest.mark.parametrize("folder", ["core", "lab", "pages"])
def test_no_source_file_is_over_the_line_limit(folder):
    long_files = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            long_files[str(path.relative_to(ROOT))] = lines
    assert not long_files, long_files


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_pages_hold_no_maths():
    """Pages wire widgets to core: torch and numpy's linear algebra stay in core (and lab's views)."""
    offenders = {}
    for path in sorted((ROOT / "pages").glob("*.py")):
        heavy = {name for name in _imported_modules(path) if name.split(".")[0] in {"torch", "sklearn", "faiss"}}
        if heavy:
            offenders[path.name] = sorted(heavy)
    assert not offenders, offenders


def test_pages_stay_thin():
    long_pages = {path.name: n for path in sorted((ROOT / "pages").glob("*.py"))
                  if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_PAGE_LINES}
    assert not long_pages, long_pages

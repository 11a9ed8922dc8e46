"""docs/ARCHITECTURE.md stays a short, true map: every path and dotted name it gives exists."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "docs" / "ARCHITECTURE.md"
MAX_LINES = 150


def code_spans(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", text)


def module_file(parts: list[str]) -> Path | None:
    """The file of the dotted module ``parts`` (a package's __init__.py), or None."""
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def resolves(dotted: str) -> bool:
    """``core.a.b.name``: the longest module prefix exists, and what follows is named in its source."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        source = module_file(parts[:cut])
        if source is None:
            continue
        rest = parts[cut:]
        return not rest or re.search(rf"\b{re.escape(rest[0])}\b", source.read_text(encoding="utf-8")) is not None
    return False


def test_the_map_fits_on_two_screens():
    assert len(MAP.read_text(encoding="utf-8").splitlines()) <= MAX_LINES


def test_every_path_and_module_the_map_names_exists():
    missing = []
    for span in code_spans(MAP.read_text(encoding="utf-8")):
        token = span.split()[0].rstrip(",.:;")
        if re.fullmatch(r"(core|lab|pages|tests|bench|docs)/[\w./-]*", token):
            if not (ROOT / token).exists():
                missing.append(token)
        elif re.fullmatch(r"(core|lab)(\.\w+)+", token) and not resolves(token):
            missing.append(token)
    assert not missing, missing

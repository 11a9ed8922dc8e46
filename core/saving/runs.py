"""The runs folder: one model folder per run, named by ``output.claim_new_run``.

``list_runs`` lists the usable models (a calibrated copy like the model it points at) and says why every other
folder is not one; a ``.tmp-*`` / ``.old-*`` leftover of an interrupted save is never loaded, and a run whose save
died between its two renames is put back first (``atomic.put_back_displaced``).
"""
from __future__ import annotations

from pathlib import Path

from core.model_names import PAIR_SCORERS, TFIDF
from core.saving.atomic import OLD_PREFIX, displaced_folders, put_back_displaced
from core.saving.calibrated import is_calibrated, parent_folder
from core.saving.model_folder import (
    WEIGHTS_FILE,
    ModelLoadError,
    read_config,
)
from core.saving.temp_files import TEMP_PREFIX


LABELS_FOLDER = "labels"  # the Label page's databases (core.training.active_rounds), not a model: lists skip it


def list_runs(root: str | Path) -> tuple[list[dict], list[str]]:
    """Saved models under ``root`` (newest first) and notes on folders that are not usable models."""
    root = Path(root)
    runs, problems = [], []
    if not root.is_dir():
        return runs, problems
    for name, _ in displaced_folders(root):
        put_back_displaced(root / name)
    for path in sorted(root.iterdir()):
        if not path.is_dir():
            continue
        if path.name.startswith((TEMP_PREFIX, OLD_PREFIX)):
            problems.append(f"{path.name}: left over from an interrupted save; ignored")
            continue
        if path.name.startswith(".") or path.name == LABELS_FOLDER:  # caches (e.g. .cache/) and labels, not models
            continue
        try:
            config = read_config(path)
        except ModelLoadError as error:
            problems.append(f"{path.name}: {error}")
            continue
        if is_calibrated(config):  # a pointer at its parent's weights: cheap checks here, the digest when loaded
            if config.get("model_type") in PAIR_SCORERS:  # no vectors for the app's pages
                what = "a calibrated TF-IDF baseline" if config.get("model_type") == TFIDF else "a stacked scorer"
                problems.append(f"{path.name}: {what}: the command line scores pairs with it "
                                "(evaluate, score, predict); the app's pages need a model with vectors")
                continue
            parent = parent_folder(config)
            if parent is not None and not parent.is_dir():
                problems.append(f"{path.name}: calibrated from {parent}, which is gone")
                continue
        elif not (path / WEIGHTS_FILE).is_file():
            problems.append(f"{path.name}: no {WEIGHTS_FILE}; ignored")
            continue
        runs.append({"name": path.name, "path": str(path), **config})
    runs.sort(key=lambda r: str(r.get("saved_at", "")), reverse=True)
    return runs, problems

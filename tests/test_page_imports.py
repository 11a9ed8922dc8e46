"""The Verdict and Label pages draw their inputs before any heavy library loads: the modules a page imports, and
the model picker every analysis page draws first, import neither PyTorch, transformers nor scikit-learn (those load
with the model, under a spinner, after the inputs are on the page)."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ["torch", "transformers", "sklearn"]
# What pages/4_Verdict.py and pages/9_Label.py import, and what lab.session.model_picker imports when it draws.
LIGHT_MODULES = ["lab.session", "lab.verdict_view", "lab.export_view", "lab.label_view",
                 "lab.figures", "lab.workspace_state", "core.training.active_rounds",
                 "lab.runs_table", "core.inference.run_quality", "core.saving"]

# A fresh interpreter: modules imported by other tests cannot hide an import.
SCRIPT = """
import json, sys
sys.path.insert(0, {root!r})
for name in {modules!r}:
    __import__(name)
print(json.dumps(sorted(name for name in {heavy!r} if name in sys.modules)))
"""


def test_the_pages_inputs_come_before_torch_transformers_and_scikit_learn():
    script = SCRIPT.format(root=str(ROOT), modules=LIGHT_MODULES, heavy=HEAVY)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []

"""An adversarial pass over the command line: each case is a command, what it must do (fail in one line, succeed,
or say something) and the files it must leave alone. Only the bundled sample is used.

    .venv/bin/python scripts/adversarial_cli.py .  [NAME-PART ...]     (works in /tmp/adv, prints one line per case)
"""
import csv
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(sys.argv[1]).resolve()
ONLY = sys.argv[2:] or None
PY = str(REPO / ".venv/bin/python")
W = Path("/tmp/adv")
shutil.rmtree(W, ignore_errors=True)
W.mkdir()
DATA = W / "data.csv"
shutil.copy(REPO / "assets/sample_pairs.csv", DATA)


def run(args, timeout=300, pre=""):
    cmd = f"{pre} cd {W} && {PY} -m core " + " ".join(args)
    start = time.time()
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    return p.returncode, p.stdout, p.stderr, time.time() - start


def digest(path):
    path = Path(path)
    if path.is_dir():
        return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(path.rglob("*")) if p.is_file()}
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def q(s):
    return "'" + s.replace("'", "'\\''") + "'"


print("setup: training two tiny models", flush=True)
rc, out, err, _ = run(["train", "--data", "data.csv", "--model", "lstm", "--epochs", "1", "--max-steps", "5",
                       "--out", "m"])
assert rc == 0, err[-2000:]
rc, out, err, _ = run(["calibrate", "--model", "m", "--data", "data.csv", "--out", "cal"])
assert rc == 0, err[-2000:]



def write(name, text, mode="w"):
    path = W / name
    if mode == "wb":
        path.write_bytes(text)
    else:
        path.write_text(text)
    return name


rows = list(csv.reader(io.StringIO(DATA.read_text())))
buf = io.StringIO(); w = csv.writer(buf); w.writerow(rows[0])
for r in rows[1:]:
    w.writerow([r[1], r[0], r[2]])
write("swapped.csv", buf.getvalue())
buf = io.StringIO(); w = csv.writer(buf); w.writerow(rows[0])
for r in rows[1:]:
    w.writerow([r[0], r[1], str(1 - int(r[2]))])
write("flipped.csv", buf.getvalue())
write("copy.csv", DATA.read_text())
write("empty.csv", "")
write("header.csv", "question1,question2,is_duplicate\n")
write("garbage.bin", os.urandom(5000), "wb")
write("labels2.csv", "question1,question2,is_duplicate\n" + "".join(f"a{i},b{i},2\n" for i in range(50)))
write("nul.csv", "question1,question2,is_duplicate\n" + "".join(f"a\x00{i},b{i},1\n" for i in range(50)))
write("utf16.csv", DATA.read_text().encode("utf-16"), "wb")
write("longfield.csv", "question1,question2,is_duplicate\n" + "x" * 3_000_000 + ",b,1\n" + DATA.read_text().split("\n", 1)[1])
(W / "bomb.csv.gz").write_bytes(gzip.compress(b"question1,question2,is_duplicate\n" + b"a,b,1\n" * 120_000_000, 9))
write("noheader.csv", DATA.read_text().split("\n", 1)[1])
(W / "adir").mkdir()
write("floatlabels.csv", "question1,question2,is_duplicate\n" + "".join(
    f"{r[0]},{r[1]},{r[2]}.0\n" for r in rows[1:] if "," not in r[0] + r[1]))
write("garbage.sqlite3", os.urandom(3000), "wb")
write("bad.parquet", b"PAR1" + os.urandom(3000) + b"PAR1", "wb")
write("extra.tsv", "id\tquestion1\tquestion2\tis_duplicate\tnote\n" + "".join(f"{i}\t{r[0]}\t{r[1]}\t{r[2]}\tx\n" for i, r in enumerate(rows[1:]) if "\t" not in r[0] + r[1]))
write("qs.csv", "question\n" + "".join(f"what is {i}?\n" for i in range(40)) + "what is 1?\n")

# a broken copy of the model for each corruption
def broken(name, edit):
    dst = W / name
    shutil.copytree(W / "m", dst)
    edit(dst)
    return name

broken("trunc", lambda d: (d / "model.safetensors").write_bytes((d / "model.safetensors").read_bytes()[:100]))
broken("badjson", lambda d: (d / "config.json").write_text("{not json"))
def huge(d):
    c = json.loads((d / "config.json").read_text())
    def bump(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if isinstance(v, int) and not isinstance(v, bool) and k not in ("version",) and 8 <= v <= 4096:
                    o[k] = 10 ** 9
                else:
                    bump(v)
    bump(c)
    (d / "config.json").write_text(json.dumps(c))
broken("hugecfg", huge)
def pickle_only(d):
    (d / "model.safetensors").unlink()
    (d / "pytorch_model.bin").write_bytes(b"\x80\x04K\x01.")
broken("pickled", pickle_only)
broken("withnotes", lambda d: (d / "notes.txt").write_text("my notes"))

CASES = [
    # name, args, expect ("fail"/"ok"), protected paths, extra shell prefix, must-contain (stdout+stderr, lower)
    ("missing data", ["train", "--data", "nope.csv", "--out", "o1"], "fail", [], "", ""),
    ("empty data", ["train", "--data", "empty.csv", "--out", "o2"], "fail", ["empty.csv"], "", ""),
    ("header only", ["train", "--data", "header.csv", "--out", "o3"], "fail", [], "", ""),
    ("binary garbage", ["train", "--data", "garbage.bin", "--out", "o4"], "fail", [], "", ""),
    ("labels all 2", ["train", "--data", "labels2.csv", "--out", "o5"], "fail", [], "", ""),
    ("data is a folder", ["train", "--data", "adir", "--out", "o6"], "fail", [], "", ""),
    ("gzip bomb", ["evaluate", "--model", "m", "--data", "bomb.csv.gz"], "fail", [], "", ""),
    ("3 MB field", ["evaluate", "--model", "m", "--data", "longfield.csv"], "any", [], "", ""),
    ("NUL bytes", ["evaluate", "--model", "m", "--data", "nul.csv"], "any", [], "", ""),
    ("UTF-16 file", ["evaluate", "--model", "m", "--data", "utf16.csv"], "ok", [], "", ""),
    ("float labels", ["evaluate", "--model", "m", "--data", "floatlabels.csv"], "ok", [], "", ""),
    ("no header row", ["evaluate", "--model", "m", "--data", "noheader.csv"], "fail", [], "", "header"),
    ("out onto data", ["train", "--data", "data.csv", "--max-steps", "2", "--model", "lstm", "--out", "data.csv", "--overwrite"], "fail", ["data.csv"], "", ""),
    ("overwrite folder with user file", ["train", "--data", "data.csv", "--max-steps", "2", "--model", "lstm", "--out", "withnotes", "--overwrite"], "fail", ["withnotes"], "", "notes.txt"),
    ("out exists no overwrite", ["train", "--data", "data.csv", "--max-steps", "2", "--model", "lstm", "--out", "m"], "fail", ["m"], "", ""),
    ("val identical to data", ["train", "--data", "data.csv", "--val", "copy.csv", "--max-steps", "2", "--model", "lstm", "--out", "o7"], "fail", [], "", ""),
    ("test swapped copy of data", ["train", "--data", "data.csv", "--test", "swapped.csv", "--max-steps", "2", "--model", "lstm", "--out", "o8"], "fail-or-said", [], "", "overlap|train"),
    ("epochs 0", ["train", "--data", "data.csv", "--epochs", "0", "--out", "o9"], "fail", [], "", ""),
    ("lr nan", ["train", "--data", "data.csv", "--lr", "nan", "--model", "lstm", "--out", "o10"], "fail", [], "", ""),
    ("batch size 0", ["train", "--data", "data.csv", "--batch-size", "0", "--model", "lstm", "--out", "o11"], "fail", [], "", ""),
    ("max length 10^7", ["train", "--data", "data.csv", "--max-length", "10000000", "--model", "lstm", "--out", "o12"], "fail", [], "", ""),
    ("bad columns", ["train", "--data", "data.csv", "--columns", "bogus=zzz", "--out", "o13"], "fail", [], "", ""),
    ("bad label map", ["train", "--data", "data.csv", "--label-map", "x", "--out", "o14"], "fail", [], "", ""),
    ("cuda without gpu", ["train", "--data", "data.csv", "--device", "cuda", "--model", "lstm", "--out", "o15"], "fail", [], "", ""),
    ("model options bad json", ["train", "--data", "data.csv", "--model", "lstm", "--model-options", q("{bad"), "--out", "o16"], "fail", [], "", ""),
    ("model options negative", ["train", "--data", "data.csv", "--model", "lstm", "--model-options", q('{"hidden_size": -1}'), "--out", "o17"], "fail", [], "", ""),
    ("model options unknown key", ["train", "--data", "data.csv", "--model", "lstm", "--model-options", q('{"nonsense": 1}'), "--out", "o18"], "fail", [], "", ""),
    ("full disk train", ["train", "--data", "data.csv", "--model", "lstm", "--max-steps", "2", "--out", "o19"], "fail", [], "ulimit -f 16;", ""),
    ("read-only out folder", ["train", "--data", "data.csv", "--model", "lstm", "--max-steps", "2", "--out", "/proc/o20"], "fail", [], "", ""),
    ("predict missing model", ["predict", "--model", "nomodel", "a", "b"], "fail", [], "", ""),
    ("predict truncated weights", ["predict", "--model", "trunc", "a", "b"], "fail", ["trunc"], "", ""),
    ("predict bad config", ["predict", "--model", "badjson", "a", "b"], "fail", ["badjson"], "", ""),
    ("predict huge config", ["predict", "--model", "hugecfg", "a", "b"], "fail", [], "", ""),
    ("predict pickled", ["predict", "--model", "pickled", "a", "b"], "fail", [], "", ""),
    ("predict empty strings", ["predict", "--model", "m", "''", "''"], "any", [], "", ""),
    ("score out inside model", ["score", "--model", "m", "--pairs", "data.csv", "--out", "m/model.safetensors", "--overwrite"], "fail", ["m"], "", ""),
    ("score out in calibrated parent", ["score", "--model", "cal", "--pairs", "data.csv", "--out", "m/x.csv"], "fail", ["m"], "", ""),
    ("score out onto input", ["score", "--model", "m", "--pairs", "data.csv", "--out", "data.csv", "--overwrite"], "fail", ["data.csv"], "", ""),
    ("score full disk", ["score", "--model", "m", "--pairs", "data.csv", "--out", "s1.csv"], "fail", [], "ulimit -f 1;", ""),
    ("embed out inside model", ["embed", "--model", "m", "--data", "data.csv", "--out", "m/v.npy"], "fail", ["m"], "", ""),
    ("export inside model", ["export", "--model", "m", "--format", "sentence-transformers", "--out", "m/exp"], "fail", ["m"], "", ""),
    ("export onto calibrated parent", ["export", "--model", "cal", "--format", "sentence-transformers", "--out", "m", "--overwrite"], "fail", ["m"], "", ""),
    ("calibrate worse than chance", ["calibrate", "--model", "m", "--data", "data.csv", "--out", "cal2"], "said", [], "", "chance|meaningless|worse"),
    ("calibrate out onto model", ["calibrate", "--model", "m", "--data", "data.csv", "--out", "m", "--overwrite"], "fail", ["m"], "", ""),
    ("dedup tiny corpus", ["dedup", "--model", "m", "--questions", "header.csv", "--out", "d1.csv"], "fail", [], "", ""),
    ("dedup ok", ["dedup", "--model", "m", "--questions", "qs.csv", "--out", "d2.csv"], "ok", [], "", ""),
    ("dedup out onto input", ["dedup", "--model", "m", "--questions", "qs.csv", "--out", "qs.csv", "--overwrite"], "fail", ["qs.csv"], "", ""),
    ("ray long host", ["dedup", "--model", "m", "--questions", "qs.csv", "--out", "d3.csv", "--engine", "ray", "--ray-address", "a" * 300 + ":6379"], "fail", [], "", ""),
    ("ray unreachable", ["dedup", "--model", "m", "--questions", "qs.csv", "--out", "d4.csv", "--engine", "ray", "--ray-address", "10.255.255.1:6379"], "fail", [], "", ""),
    ("search k 0", ["search", "--model", "m", "--corpus", "data.csv", "-k", "0", "q"], "fail", [], "", ""),
    ("search empty question", ["search", "--model", "m", "--corpus", "data.csv", "''"], "any", [], "", ""),
    ("suggest n -1", ["suggest", "--model", "m", "--questions", "qs.csv", "--n", "-1", "--out", "s2.csv"], "fail", [], "", ""),
    ("suggest labels is data", ["suggest", "--model", "m", "--questions", "qs.csv", "--labels", "data.csv", "--n", "5", "--out", "s3.csv"], "any", ["data.csv"], "", ""),
    ("workspaces missing root", ["workspaces", "--root", "nowhere"], "any", [], "", ""),
    ("threshold nan", ["predict", "--model", "m", "--threshold", "nan", "a", "b"], "fail", [], "", ""),
    ("threshold 5", ["evaluate", "--model", "m", "--data", "data.csv", "--threshold", "5"], "fail", [], "", ""),
    ("max-rows 0", ["evaluate", "--model", "m", "--data", "data.csv", "--max-rows", "0"], "fail", [], "", ""),
    ("rerank with bi-encoder", ["dedup", "--model", "m", "--questions", "qs.csv", "--out", "d5.csv", "--rerank", "m"], "fail", [], "", ""),
    ("vectors of another corpus", ["dedup", "--model", "m", "--questions", "qs.csv", "--out", "d6.csv", "--vectors", "v.npy"], "fail", [], "", ""),
    ("vectors with 5 rows changed", ["dedup", "--model", "m", "--questions", "data.csv", "--out", "d7.csv", "--vectors", "v2.npy"], "fail", [], "", ""),
    ("labels db is garbage", ["suggest", "--model", "m", "--questions", "qs.csv", "--labels", "garbage.sqlite3", "--n", "5", "--out", "s4.csv"], "fail", ["garbage.sqlite3"], "", ""),
    ("onnx backend on torch folder", ["predict", "--model", "m", "--backend", "onnx", "a", "b"], "ok", [], "", ""),
    ("tampered onnx export", ["predict", "--model", "ox", "--backend", "onnx", "a", "b"], "fail", [], "", ""),
    ("columns name absent", ["train", "--data", "data.csv", "--columns", "question1=nothere", "--out", "o21"], "fail", [], "", ""),
    ("empty out", ["score", "--model", "m", "--pairs", "data.csv", "--out", "''"], "fail", [], "", ""),
    ("dedup threshold 2", ["dedup", "--model", "m", "--questions", "qs.csv", "--out", "d8.csv", "--threshold", "2"], "fail", [], "", ""),
    ("idle days -1", ["workspaces", "--root", "adir", "--remove-idle-days", "-1"], "fail", ["adir"], "", ""),
    ("parquet garbage", ["evaluate", "--model", "m", "--data", "bad.parquet"], "fail", [], "", ""),
    ("tsv with extra columns", ["evaluate", "--model", "m", "--data", "extra.tsv"], "ok", [], "", ""),
]

fails = []
for name, args, expect, protect, pre, must in CASES:
    if ONLY and not any(o in name for o in ONLY):
        continue
    before = {p: digest(W / p) for p in protect}
    if name == "vectors with 5 rows changed":
        run(["embed", "--model", "m", "--data", "data.csv", "--out", "v2.npy"])
        v = np.load(W / "v2.npy"); v[:5] = v[5:10]; np.save(W / "v2.npy", v)
    if name == "tampered onnx export":
        run(["export", "--model", "m", "--format", "onnx", "--out", "ox"])
        g = next((W / "ox").rglob("*.onnx")); g.write_bytes(g.read_bytes()[:-10] + b"0123456789")
    if name == "vectors of another corpus":
        run(["embed", "--model", "m", "--data", "data.csv", "--out", "v.npy"])
    try:
        rc, out, err, secs = run(args, timeout=120, pre=pre)
    except subprocess.TimeoutExpired:
        fails.append((name, "TIMEOUT")); print(f"FAIL {name}: timeout", flush=True); continue
    text = (out + err).lower()
    errlines = [l for l in err.splitlines() if l.strip() and "warning" not in l.lower() and "%|" not in l and "epoch " not in l]
    problems = []
    if "traceback" in text:
        problems.append("traceback")
    if expect == "fail" and rc == 0:
        problems.append("exit 0")
    if expect == "ok" and rc != 0:
        problems.append(f"exit {rc}: {err.strip()[-300:]}")
    if expect in ("fail", "fail-or-said", "said") and rc != 0 and len(errlines) > 2:
        problems.append(f"{len(errlines)} error lines")
    if must and not any(m in text for m in must.split("|")):
        problems.append(f"does not say {must!r}")
    for p in protect:
        if digest(W / p) != before[p]:
            problems.append(f"CHANGED {p}")
    if secs > 60:
        problems.append(f"{secs:.0f} s")
    status = "FAIL" if problems else "ok  "
    last = (err.strip().splitlines() or out.strip().splitlines() or [""])[-1][:160]
    print(f"{status} {name}: rc={rc} {'; '.join(problems)} | {last}", flush=True)
    if problems:
        fails.append((name, problems))
print(f"\n{len(fails)} failures of {len(CASES)} cases")

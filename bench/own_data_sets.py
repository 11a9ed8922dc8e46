"""Three public pair datasets with official train / dev / test splits, written as the files a user would have.

``prepare(name) -> {"train": path, "val": path, "test": path}`` reads the dataset's files out of a snapshot
of the public GitHub repository that holds them (a bare git directory under ``MIRROR``, as the ``fetch``
tool leaves it, or any clone), checks each file against its recorded git blob id, and writes the three
splits under ``bench/out/datasets/<name>/`` (ignored by git: the data is never committed). The files keep
the dataset's own column names and its own text labels, so a run needs the lab's ``--columns`` and
``--label-map`` exactly as a user with this data would (``DataSet.columns`` and ``DataSet.label_map``).

The datasets (sizes are pairs; "positive" is the class the lab calls a duplicate):

- ``sick``: SICK (Marelli et al., LREC 2014; the SemEval-2014 Task 1 data), sentence pairs about
  pictures and videos. Official split by its ``SemEval_set`` column: TRAIN 4,439 / TRIAL 495 (the dev
  file) / TEST 4,906. Label rule: ``entailment_label`` ENTAILMENT -> 1, NEUTRAL and CONTRADICTION -> 0
  (positive share 28.7 % / 28.9 % / 28.6 %). Licence: CC BY-NC-SA 3.0 (research use allowed). The file is
  the full 12-column ``SICK.txt`` of the official distribution, taken from a project that vendored it.
- ``semeval-cqa``: SemEval-2016 Task 3 subtask B (Nakov et al., SemEval 2016), question-question
  similarity on the Qatar Living forum: an original question against 10 forum questions a search engine
  returned. Each side is the question's subject and body (``OrgQuestion``, ``RelQuestion``, joined
  by a space). Splits (v3.2, the final release): TRAIN part 2 670 / DEV 500 / TEST 700. TRAIN part 1
  (1,999 pairs) is 4 MiB or more and in no snapshot the fetch tool can bring; the v2.0 part 1 that is
  (613 pairs) holds all 50 DEV original questions, so it is NOT used. Label rule, the task's own:
  ``RELQ_RELEVANCE2ORGQ`` PerfectMatch and Relevant -> 1, Irrelevant -> 0; the TEST labels come from
  the official gold file, which gives only the merged label as ``true`` / ``false`` (positive share
  44.2 % / 42.8 % / 33.3 %). Licence: "free for general research use" (the task's README), citing
  Nakov et al. 2016.

- ``mrpc``: the Microsoft Research Paraphrase Corpus (Dolan & Brockett, 2005), news sentence pairs judged
  paraphrases or not. Official TRAIN / TEST files; no official dev file, so a seeded tenth of TRAIN is the dev
  file and the rest trains. Label rule: ``Quality`` 1 -> 1, 0 -> 0 (about two thirds positive).

    .venv/bin/python bench/own_data_sets.py            # prepare all three, print the paths and counts
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO / "bench" / "out" / "datasets"
# Snapshots of public repositories: <MIRROR>/<owner>+<name>/repo is a git directory (the fetch tool's layout).
MIRROR = Path(os.environ.get("OWN_DATA_MIRROR", "/work/.mirror"))


@dataclass(frozen=True)
class Blob:
    """One file of a public GitHub repository, pinned: the commit it was read at and its git blob id."""

    repo: str  # owner/name
    commit: str
    path: str
    blob: str  # git's id of the content: what is read is checked against it


@dataclass(frozen=True)
class DataSet:
    name: str
    title: str
    licence: str
    sources: dict  # role -> Blob
    files: dict  # split ("train", "val", "test") -> file name written under DATASETS/<name>/
    question1: str  # column names as the dataset spells them
    question2: str
    label: str
    positive: tuple  # label values that mean "duplicate" (the lab's 1)
    negative: tuple
    rule: str  # the label rule in words
    notes: list = field(default_factory=list)
    # A column naming the unit whose pairs are not independent (bench/own_data.py resamples whole units for
    # its intervals and verdicts); "" for groups of pairs linked by a shared question (core.data.splitting).
    group_column: str = ""

    @property
    def columns(self) -> str:
        """The lab's ``--columns`` value for these files."""
        return f"question1={self.question1},question2={self.question2},is_duplicate={self.label}"

    @property
    def label_map(self) -> str:
        """The lab's ``--label-map`` value for these files."""
        return ",".join([f"{v}=1" for v in self.positive] + [f"{v}=0" for v in self.negative])

    def binary(self, value) -> int | None:
        """The 0/1 label of one raw label value by this dataset's rule (None when it is neither)."""
        text = str(value).strip()
        for values, label in ((self.positive, 1), (self.negative, 0)):
            if text in values or text.lower() in {v.lower() for v in values}:
                return label
        return None


MRPC_DEV_SEED = 0  # MRPC's dev file: a seeded tenth of its train file

SICK = DataSet(
    name="sick",
    title="SICK (SemEval-2014 Task 1), entailment",
    licence="CC BY-NC-SA 3.0 (SICK's own licence; research use allowed); Marelli et al., LREC 2014",
    sources={"all": Blob("meshde/EruditeX", "97e62f0cc2ddc47b2541d438e4a0afcca10564cf", "SICK.txt",
                         "a0648f5c1b45b66de95d36094848bc46437b5f6f")},
    files={"train": "SICK_train.tsv", "val": "SICK_trial.tsv", "test": "SICK_test.tsv"},
    question1="sentence_A", question2="sentence_B", label="entailment_label",
    positive=("ENTAILMENT",), negative=("NEUTRAL", "CONTRADICTION"),
    rule="entailment_label ENTAILMENT -> 1; NEUTRAL, CONTRADICTION -> 0",
    notes=["official splits by the SemEval_set column: TRAIN, TRIAL (dev), TEST",
           "SICK.txt is the official 12-column release, vendored by meshde/EruditeX (removed from its later commits)"],
)

SEMEVAL_CQA = DataSet(
    name="semeval-cqa",
    title="SemEval-2016 Task 3 subtask B, question-question similarity (Qatar Living)",
    licence="free for general research use (SemEval-2016 Task 3 README); Nakov et al., SemEval 2016",
    sources={
        "train": Blob("bnsriram/NLPCommunityQuestionAnswering", "8e89aea3ad9f3157088acdbfc4955413d30ebb9d",
                      "v3.2/train/SemEval2016-Task3-CQA-QL-train-part2.xml",
                      "50f9aae5c771681af9c4c2553512ba7180c2c891"),
        "val": Blob("bnsriram/NLPCommunityQuestionAnswering", "8e89aea3ad9f3157088acdbfc4955413d30ebb9d",
                    "v3.2/dev/SemEval2016-Task3-CQA-QL-dev.xml", "22568fe83f8bd3093993027004659ea0705de74d"),
        "test": Blob("whiskeyromeo/CommunityQuestionAnswering", "4325fcf8bd1a9072da2d187d0de219fb9620ede1",
                     "SemEval2016_task3_test_input/English/SemEval2016-Task3-CQA-QL-test-input.xml",
                     "a31f77da6eb6f1123c614ddb29f4d8ee94138188"),
        "test_gold": Blob("bnsriram/NLPCommunityQuestionAnswering", "8e89aea3ad9f3157088acdbfc4955413d30ebb9d",
                          "SemEval2016_task3_submissions_and_scores/_gold/"
                          "SemEval2016-Task3-CQA-QL-test.xml.subtaskB.relevancy",
                          "d5faaf3d2509614c45b23361b30457ff97498f1f"),
    },
    files={"train": "SemEval2016-Task3-CQA-QL-train-part2.csv", "val": "SemEval2016-Task3-CQA-QL-dev.csv",
           "test": "SemEval2016-Task3-CQA-QL-test.csv"},
    question1="OrgQuestion", question2="RelQuestion", label="RELQ_RELEVANCE2ORGQ",
    # The task's rule: PerfectMatch is merged with Relevant at test time. The test's gold file gives only
    # the merged label, as true/false.
    positive=("PerfectMatch", "Relevant", "true"), negative=("Irrelevant", "false"),
    rule="RELQ_RELEVANCE2ORGQ PerfectMatch, Relevant (test gold: true) -> 1; Irrelevant (test gold: false) -> 0",
    notes=["train = v3.2 TRAIN part 2 only: part 1 (1,999 pairs) is 4 MiB or more and in no fetchable snapshot; "
           "the v2.0 part 1 that is holds all 50 DEV original questions, so it is left out",
           "test texts from the official test input, labels from the official subtask B gold file",
           "texts as released: 470 of the 700 test original-question bodies are wrapped in doubled quotes "
           "(\"\"...\"\"), an artifact of the official test input that train and dev do not have"],
    group_column="ORGQ_ID",  # 10 pairs per original question; shared related questions chain 600 of 700 test pairs
)

MRPC = DataSet(
    name="mrpc",
    title="MRPC (Microsoft Research Paraphrase Corpus), news sentence paraphrases",
    licence="Microsoft Research Paraphrase Corpus licence (research use); Dolan & Brockett, IWP 2005",
    sources={"train": Blob("Pzeyang/Paraphrase_Identification", "dc1755eb1a4755ca310f97209391f1f5c06e2fd1",
                           "msr_paraphrase_train.txt", "b48d5c3b7806ea3829cda7b6b9a83dd03431cb03"),
             "test": Blob("Pzeyang/Paraphrase_Identification", "dc1755eb1a4755ca310f97209391f1f5c06e2fd1",
                          "msr_paraphrase_test.txt", "43e6371c7c652eb9a93e3aa6af563f782c706287")},
    files={"train": "msr_paraphrase_train.tsv", "val": "msr_paraphrase_dev.tsv", "test": "msr_paraphrase_test.tsv"},
    question1="#1 String", question2="#2 String", label="Quality",
    positive=("1",), negative=("0",),
    rule="Quality 1 (paraphrase) -> 1, 0 -> 0",
    notes=["the official train and test files; no official dev file: a seeded 10 % of train "
           f"(seed {MRPC_DEV_SEED}) is the dev file, the rest trains (GLUE's dev ids are not in the snapshot)"],
)

SETS = {d.name: d for d in (SICK, SEMEVAL_CQA, MRPC)}
SPLITS = ("train", "val", "test")


# ---- reading the snapshots ------------------------------------------------------------------------
def git_dir(repo: str) -> Path:
    """The git directory of a snapshot of ``repo`` (owner/name): MIRROR/owner+name/repo (the fetch tool's
    layout), or MIRROR/owner+name when that is itself a bare repository or a clone."""
    base = MIRROR / repo.replace("/", "+")
    for candidate in (base / "repo", base / ".git", base):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    raise SystemExit(f"no snapshot of github.com/{repo} under {base}: fetch it first (the fetch tool: "
                     f"github:{repo}; or `git clone --bare https://github.com/{repo} {base}/repo`), or set "
                     "OWN_DATA_MIRROR to the folder that holds <owner>+<name>/repo")


def read_blob(source: Blob) -> bytes:
    """The file's bytes, after checking that the commit has it at that path with that blob id."""
    where = git_dir(source.repo)

    def git(*args) -> bytes:
        return subprocess.run(["git", f"--git-dir={where}", *args], check=True, capture_output=True).stdout

    try:
        found = git("rev-parse", "--verify", "-q", f"{source.commit}:{source.path}").decode().strip()
    except subprocess.CalledProcessError:
        raise SystemExit(f"{source.repo}@{source.commit[:10]} has no {source.path} in this snapshot") from None
    if found != source.blob:
        raise SystemExit(f"{source.repo}@{source.commit[:10]}:{source.path} is blob {found}, expected {source.blob}")
    return git("cat-file", "blob", source.blob)


# ---- conversion -----------------------------------------------------------------------------------
SICK_COLUMNS = ("pair_ID", "sentence_A", "sentence_B", "entailment_label", "relatedness_score", "entailment_AB",
                "entailment_BA", "sentence_A_original", "sentence_B_original", "sentence_A_dataset",
                "sentence_B_dataset", "SemEval_set")
SICK_SETS = {"train": "TRAIN", "val": "TRIAL", "test": "TEST"}


def _sick_rows(data: bytes) -> dict[str, list[list[str]]]:
    lines = data.decode("utf-8").splitlines()
    header = lines[0].split("\t")
    if tuple(header) != SICK_COLUMNS:
        raise SystemExit(f"SICK.txt's header is {header}, expected {list(SICK_COLUMNS)}")
    by_set = {split: [] for split in SPLITS}
    wanted = {value: split for split, value in SICK_SETS.items()}
    for line in lines[1:]:
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != len(SICK_COLUMNS) or fields[-1] not in wanted:
            raise SystemExit(f"SICK.txt: unexpected line {line[:80]!r}")
        by_set[wanted[fields[-1]]].append(fields)
    return {split: [list(SICK_COLUMNS)] + rows for split, rows in by_set.items()}


CQA_COLUMNS = ("ORGQ_ID", "RELQ_ID", "OrgQSubject", "OrgQBody", "RelQSubject", "RelQBody", "OrgQuestion",
               "RelQuestion", "RELQ_RELEVANCE2ORGQ")


def _text(element, tag: str) -> str:
    return " ".join((element.findtext(tag) or "").split())  # one line: the lab reads one record per line


def _cqa_rows(data: bytes, gold: dict | None = None) -> list[list[str]]:
    """One row per (original question, related question) of a SemEval-2016 Task 3 English XML file;
    ``gold`` (RELQ_ID -> label) replaces the file's labels (the test input's are "?")."""
    root = ET.fromstring(data)
    rows = [list(CQA_COLUMNS)]
    for original in root.iter("OrgQuestion"):
        subject, body = _text(original, "OrgQSubject"), _text(original, "OrgQBody")
        related = original.find("Thread/RelQuestion")
        rel_subject, rel_body = _text(related, "RelQSubject"), _text(related, "RelQBody")
        relq_id = related.get("RELQ_ID")
        label = related.get("RELQ_RELEVANCE2ORGQ") if gold is None else gold[relq_id]
        rows.append([original.get("ORGQ_ID"), relq_id, subject, body, rel_subject, rel_body,
                     f"{subject} {body}".strip(), f"{rel_subject} {rel_body}".strip(), label])
    return rows


def _cqa_gold(data: bytes) -> dict[str, str]:
    """RELQ_ID -> "true"/"false" from a subtask B .relevancy gold file (ORGQ_ID RELQ_ID rank score label)."""
    gold = {}
    for line in data.decode("utf-8").splitlines():
        if line.strip():
            fields = line.split("\t")
            gold[fields[1]] = fields[4].strip()
    return gold


def _mrpc_rows(data: bytes) -> list[list[str]]:
    """The file's rows as released (UTF-8 with a BOM, tab separated, quotes as plain characters)."""
    lines = [line.split("\t") for line in data.decode("utf-8-sig").splitlines() if line.strip()]
    header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    if lines[0] != header or any(len(line) != len(header) for line in lines):
        raise SystemExit(f"MRPC: unexpected header {lines[0]} or a line without {len(header)} fields")
    return lines


def _convert(dataset: DataSet) -> dict[str, list[list[str]]]:
    if dataset is SICK:
        return _sick_rows(read_blob(dataset.sources["all"]))
    if dataset is MRPC:
        train, test = _mrpc_rows(read_blob(dataset.sources["train"])), _mrpc_rows(read_blob(dataset.sources["test"]))
        import random

        rows = train[1:]
        dev = set(random.Random(MRPC_DEV_SEED).sample(range(len(rows)), round(len(rows) * 0.1)))
        return {"train": [train[0]] + [r for i, r in enumerate(rows) if i not in dev],
                "val": [train[0]] + [r for i, r in enumerate(rows) if i in dev], "test": test}
    gold = _cqa_gold(read_blob(dataset.sources["test_gold"]))
    return {"train": _cqa_rows(read_blob(dataset.sources["train"])),
            "val": _cqa_rows(read_blob(dataset.sources["val"])),
            "test": _cqa_rows(read_blob(dataset.sources["test"]), gold)}


# ---- writing --------------------------------------------------------------------------------------
def _table_text(rows: list[list[str]], tab: bool) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, delimiter="\t" if tab else ",", lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def _subset(rows: list[list[str]], max_rows: int, seed: int) -> list[list[str]]:
    """The header and a seeded sample of ``max_rows`` data rows, in file order (both classes kept)."""
    import numpy as np

    body = rows[1:]
    if len(body) <= max_rows:
        return rows
    keep = np.sort(np.random.default_rng(seed).permutation(len(body))[:max_rows])
    return [rows[0]] + [body[i] for i in keep]


def prepare(name: str, max_rows: int | None = None, binary_labels: bool = False, seed: int = 0) -> dict[str, Path]:
    """``{"train": path, "val": path, "test": path}`` of dataset ``name``, written under
    ``DATASETS/<name>/`` (again only when its sources or this code changed).

    ``max_rows``: a seeded sample of that many pairs of each split (smoke runs), in a folder of its own.
    ``binary_labels``: the label column holds the rule's 0/1 instead of the dataset's words (for a checkout
    whose CLI has no ``--label-map`` yet), also in a folder of its own."""
    dataset = SETS[name]
    folder = DATASETS / name
    if max_rows:
        folder = folder / f"sample-{max_rows}"
    if binary_labels:
        folder = folder / "binary-labels"
    manifest = {"dataset": name, "max_rows": max_rows, "binary_labels": binary_labels, "seed": seed,
                "sources": {role: vars(blob) for role, blob in dataset.sources.items()},
                "code": hashlib.sha256(Path(__file__).read_bytes()).hexdigest()}
    paths = {split: folder / dataset.files[split] for split in SPLITS}
    stamp = folder / "manifest.json"
    if stamp.is_file() and all(p.is_file() for p in paths.values()):
        try:
            if json.loads(stamp.read_text())["inputs"] == manifest:
                return paths
        except (ValueError, KeyError):
            pass
    tables = _convert(dataset)
    folder.mkdir(parents=True, exist_ok=True)
    counts = {}
    for split, rows in tables.items():
        label_at = rows[0].index(dataset.label)
        if binary_labels:
            rows = [rows[0]] + [r[:label_at] + [str(dataset.binary(r[label_at]))] + r[label_at + 1:] for r in rows[1:]]
        if max_rows:
            rows = _subset(rows, max_rows, seed)
        labels = [dataset.binary(r[label_at]) if not binary_labels else int(r[label_at]) for r in rows[1:]]
        if None in labels:
            raise SystemExit(f"{name} {split}: a label outside the rule: {rows[1 + labels.index(None)][label_at]!r}")
        counts[split] = {"pairs": len(labels), "positive": int(sum(labels))}
        target = paths[split]
        temporary = target.with_name(target.name + ".tmp")
        temporary.write_text(_table_text(rows, tab=target.suffix == ".tsv"), encoding="utf-8")
        temporary.replace(target)
    stamp.write_text(json.dumps({"inputs": manifest, "counts": counts}, indent=2))
    return paths


def counts(name: str, paths: dict[str, Path]) -> dict:
    """``{split: {"pairs", "positive"}}`` as the manifest beside ``paths`` recorded them."""
    stamp = next(iter(paths.values())).parent / "manifest.json"
    return json.loads(stamp.read_text())["counts"]


def describe(name: str) -> dict:
    """What the benchmark's JSON records about a dataset: title, licence, rule, sources, notes."""
    d = SETS[name]
    return {"title": d.title, "licence": d.licence, "label_rule": d.rule, "columns": d.columns,
            "label_map": d.label_map, "notes": list(d.notes), "group_column": d.group_column,
            "sources": {role: {"repo": b.repo, "commit": b.commit, "path": b.path, "blob": b.blob}
                        for role, b in d.sources.items()}}


def main() -> None:
    import argparse

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default=",".join(SETS), help=f"comma-separated: {', '.join(SETS)}")
    p.add_argument("--max-rows", type=int, default=None, help="a seeded sample of N pairs of each split")
    p.add_argument("--binary-labels", action="store_true", help="write the rule's 0/1 labels instead of the words")
    args = p.parse_args()
    for name in [n for n in args.datasets.split(",") if n]:
        if name not in SETS:
            sys.exit(f"unknown dataset {name!r}; expected one of {', '.join(SETS)}")
        paths = prepare(name, args.max_rows, args.binary_labels)
        found = counts(name, paths)
        print(f"{name}: {SETS[name].title}")
        for split, path in paths.items():
            c = found[split]
            share = c["positive"] / max(c["pairs"], 1)
            print(f"  {split:5s} {c['pairs']:6,} pairs, {c['positive']:5,} positive ({share:.1%}): "
                  f"{path.relative_to(REPO)}")
        print(f"  --columns \"{SETS[name].columns}\"" + ("" if args.binary_labels else
                                                           f" --label-map \"{SETS[name].label_map}\""))


if __name__ == "__main__":
    main()

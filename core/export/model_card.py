"""``README.md``, an export's model card, laid out loosely like sentence-transformers' cards: one template filled
from the export's manifest."""
from __future__ import annotations

import json
import math
import re

from core.data.splitting import recorded_by_question
from core.export.manifest import MANIFEST_FILE, finite, part
from core.losses.registry import LOSSES

CARD_FILE = "README.md"
BASE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def _plain(value, limit: int = 200) -> str:
    """A config value as one line of plain text, at most ``limit`` characters."""
    text = _CONTROL.sub(" ", str(value)).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _code(value, limit: int = 200) -> str:
    """Inline code: nothing in it is read as Markdown or HTML."""
    return "`" + _plain(value, limit).replace("`", "'") + "`"


def _number(value, digits: int = 4, scale: int = 1) -> str:
    if not finite(value):
        return "n/a"
    return f"{value:,}" if isinstance(value, int) and scale == 1 else f"{scale * value:.{digits}f}"


def loss_line(config: dict) -> str:
    """The run's loss in words, one line of the card's Training Details (from ``config["loss"]``)."""
    loss, run = part(config, "loss"), part(config, "run")
    name = loss.get("name")
    described = LOSSES.get(name) if isinstance(name, str) else None
    if described is None:
        return f"{_code(name)}" if name else "n/a"
    # The config comes from a saved folder: only sanitised text goes into the registry's template.
    line = described.card.format(margin=_number(loss.get("margin"), 3), form=_code(loss.get("form")),
                                 scale=_number(loss.get("scale"), 1), weight=_number(loss.get("weight"), 2))
    # Hard negatives join batches of duplicates only.
    hard = described.batch_kind == "duplicates" and run.get("hard_negatives")
    mined = f" and {_number(config.get('mined_negatives'))} mined among the training questions with the starting model"
    return line + (", plus labelled hard negatives" if hard else "") + (
        mined if hard and run.get("mine_negatives") else "")


def augmented_line(config: dict) -> str:
    """What the augmented recipe did (``config["augmented"]``, written by ``core.training.distillation``), or ""."""
    record = part(config, "augmented")
    if not record:
        return ""
    teacher = part(record, "teacher")
    drawn = (f" (of {_number(record['silver_pairs_drawn'])} drawn: as many as its share of the time budget allowed)"
             if record.get("silver_pairs_drawn", 0) > record.get("silver_pairs", 0) else "")
    return (f"Augmented SBERT (Thakur et al., 2021): a cross-encoder teacher trained on the gold pairs (validation ROC "
            f"AUC {_number(teacher.get('validation_roc_auc'), 3)}) labelled {_number(record.get('silver_pairs'))} "
            f"silver pairs{drawn} of {_number(record.get('questions'))} questions from "
            f"{_code(record.get('questions_from'))} "
            f"({_number(record.get('neighbour_pairs'))} nearest neighbours under the starting model, "
            f"{_number(record.get('random_pairs'))} random; {_number(record.get('silver_duplicates'))} duplicates at "
            f"its threshold {_number(teacher.get('threshold'), 3)}); this model trained on gold and silver together.")


def _usage(manifest: dict, folder_name: str) -> str:
    """The card's Python snippet, opening the export by ``folder_name``."""
    cross, threshold = manifest["model_type"] == "cross-encoder", manifest["threshold"]
    shown = f"{threshold:.6f}" if threshold is not None else "0.5  # no calibrated threshold: choose one"
    setup = (f'MODEL_DIR = {json.dumps(folder_name or "path/to/this/folder")}  # this folder\nTHRESHOLD = {shown}  '
             f"# duplicate when the {'probability' if cross else 'cosine'} is above it: "
             "recalibrate it on your own pairs")
    onnx = (f"import numpy as np\nimport onnxruntime as ort\nfrom tokenizers import Tokenizer\n\n{setup}\n"
            f"PAD_ID = {manifest['pad_id']}\n\n"
            f'tokenizer = Tokenizer.from_file(f"{{MODEL_DIR}}/tokenizer.json")  '
            f'# truncates to {2 * manifest["max_length"] - 1 if cross else manifest["max_length"]} tokens\n')
    if manifest["export_format"] == "sentence-transformers":
        body = f"""from sentence_transformers import SentenceTransformer

{setup}

model = SentenceTransformer(MODEL_DIR)
q1, q2 = model.encode(["How do I learn Python?", "What is the best way to learn Python?"])
score = float(model.similarity(q1, q2))  # cosine similarity"""
    elif cross:
        body = onnx + """tokenizer.enable_padding(pad_id=PAD_ID)
session = ort.InferenceSession(f"{MODEL_DIR}/model.onnx")

pairs = [("How do I learn Python?", "What is the best way to learn Python?")]
encodings = tokenizer.encode_batch(pairs)  # [CLS] q1 [SEP] q2 [SEP], with token types 0 then 1
inputs = {name: np.array([getattr(e, field) for e in encodings], dtype=np.int64) for name, field in
          (("input_ids", "ids"), ("attention_mask", "attention_mask"), ("token_type_ids", "type_ids"))}
score = float(session.run(None, inputs)[0][0])  # the first pair's duplicate probability"""
    else:
        sessions = ", ".join(f'ort.InferenceSession(f"{{MODEL_DIR}}/{name}")' for name in manifest["files"]["graphs"])
        body = onnx + f"""towers = [{sessions}]


def embed(texts, tower=0):
    \"\"\"Vectors of texts; tower 1 encodes the second question of a pair.\"\"\"
    rows = [encoding.ids or [PAD_ID] for encoding in tokenizer.encode_batch(texts)]  # an empty text keeps one token
    width = max(len(row) for row in rows)
    input_ids = np.array([row + [PAD_ID] * (width - len(row)) for row in rows], dtype=np.int64)
    attention_mask = np.array([[1] * len(row) + [0] * (width - len(row)) for row in rows], dtype=np.int64)
    session = towers[min(tower, len(towers) - 1)]
    return session.run(None, {{"input_ids": input_ids, "attention_mask": attention_mask}})[0]


q1 = embed(["How do I learn Python?"], tower=0)[0]
q2 = embed(["What is the best way to learn Python?"], tower=1)[0]
score = float(q1 @ q2 / (np.linalg.norm(q1) * np.linalg.norm(q2)))  # cosine similarity"""
    return f"""```python\n{body}\nprint(round(score, 4), "DUPLICATE" if score > THRESHOLD else "NOT DUPLICATE")\n```"""


# What a cross-encoder is and costs, in the card's opening paragraph (in passes: milliseconds would be one machine's).
CROSS_ENCODER_WORDS = (
    "It reads both questions together, in one pass over `[CLS] question 1 [SEP] question 2 [SEP]`, so their words "
    "attend to each other, and gives the probability that they are duplicates; above the threshold they are called "
    "duplicates. It makes no vector of a question, so it cannot embed, index or search a corpus: every pair costs one "
    "forward pass of the whole model over both questions' tokens, where a bi-encoder encodes each question once and "
    "compares vectors. Scoring every pair of n questions is n(n-1)/2 passes; use it to confirm the few candidate pairs "
    "a bi-encoder finds (Siamese Lab's `dedup --rerank`).")
METRIC_ROWS = {"roc_auc": "ROC AUC", "average_precision": "Average precision", "accuracy": "Accuracy",
               "precision": "Precision", "recall": "Recall", "f1": "F1", "threshold": "Threshold", "n": "Pairs"}


def _interval(bounds) -> str:
    """"0.8120 to 0.8710" for a bootstrap interval, "" when there is none."""
    ok = isinstance(bounds, (list, tuple)) and len(bounds) == 2
    return f"{_number(bounds[0])} to {_number(bounds[1])}" if ok else ""


def _metrics(metrics: dict, verdicts: dict | None = None) -> str:
    """A metrics table with its bootstrap intervals; with ``verdicts`` (the run's metrics), a line per baseline."""
    intervals = part(metrics, "intervals")
    table = "\n".join(["| Metric | Value | 95 % interval |", "|:--|--:|:--|"] + [
        f"| {label} | {_number(metrics[key])} | {_interval(intervals.get(key))} |"
        for key, label in METRIC_ROWS.items() if key in metrics])
    said = []
    for key, name in (("tfidf", "TF-IDF cosine, fitted on these pairs' own questions"),
                      ("zero_shot", "zero-shot MiniLM")):
        entry = part(part(verdicts or {}, "baselines"), key)
        verdict = part(entry, "verdict")
        if verdict.get("verdict") in ("better", "no measurable difference", "worse"):
            said.append(f"- Against {name} (ROC AUC {_number(entry.get('roc_auc'))}): **{verdict['verdict']}** "
                        f"(difference {_number(verdict.get('difference'))}, 95 % interval "
                        f"{_interval(verdict.get('interval'))}, paired bootstrap over {_number(verdict.get('pairs'))} "
                        "validation pairs)")
    return "\n\n".join([table, "\n".join(said)] if said else [table])


def _files(manifest: dict, cross: bool) -> str:
    """What an export's files are: the ONNX graphs with their inputs, tokenizer and check, or the ST architecture."""
    length, check, graphs = manifest["max_length"], part(manifest, "check"), manifest["files"].get("graphs")
    if manifest["export_format"] != "onnx":
        return (f"### Full Model Architecture\n\n```\nSentenceTransformer(Transformer(BertModel, max_seq_length="
                f"{length}) -> Pooling(mean, dim={manifest['embedding_dim']})"
                f"{' -> Normalize()' if manifest['normalized'] else ''})\n```")
    if cross:
        graph = (f"`{graphs[0]}`: a pair joined as `[CLS] question 1 [SEP] question 2 [SEP]` (`token_type_ids` 0 on "
                 "the first question's tokens, 1 on the second's)")
    elif len(graphs) == 2:
        graph = (f"`{graphs[0]}`: tower 0, encodes the first question of a pair; `{graphs[1]}`: tower 1, encodes "
                 "the second (the two towers have their own weights)")
    else:
        graph = f"`{graphs[0]}`: encodes both questions of a pair (one set of weights)"
    inputs, output = ", ".join(f"`{name}`" for name in part(manifest, "inputs")), part(manifest, "output")
    kind = "WordPiece, BERT uncased" if manifest["tokenizer_kind"] == "wordpiece" else "word level, lower-cased"
    cut = (f"encoding a pair cut to {2 * length - 1} tokens longest first; Siamese Lab cuts each question at "
           f"{length}" if cross else f"truncating to {length} tokens")
    differ = (f"onnxruntime's {'probabilities' if cross else 'vectors'} differ from PyTorch's by at most "
              f"{check.get('max_abs_diff_vs_pytorch', math.nan):.2g} on "
              f"{_number(check.get('pairs', check.get('texts')))} probe {'pairs' if cross else 'texts'}")
    cosine = f" (cosine to them at least {check['min_cosine_vs_pytorch']:.4f})" if not cross else ""
    return "\n".join([
        "### Files", "", f"- {graph}",
        f"- inputs {inputs} (int64, batch × sequence, dynamic; the attention mask is 1 on real tokens, which come "
        f"first), output `{output.get('name')}` (float32, {' × '.join(map(str, output.get('shape', [])))})",
        f"- `tokenizer.json`: the model's tokenizer for Hugging Face `tokenizers` ({kind}, {cut})",
        f"- weights quantised to int8 (dynamic, per channel): {differ}{cosine}; recalibrate the threshold for them"
        if manifest.get("quantization") else f"- checked on export: {differ}"])


def _evaluation(manifest: dict, config: dict, cross: bool) -> str:
    """Where the held-out figures come from, their tables, and the test pairs' at the validation threshold."""
    from core.models.minilm import ZERO_SHOT_THRESHOLD

    data, metrics = part(config, "data"), part(config, "metrics")
    validation, test = part(metrics, "validation"), part(metrics, "test")
    if manifest["zero_shot"]:
        return (f"Not measured at export. The threshold {ZERO_SHOT_THRESHOLD:.2f} approximates zero-shot MiniLM's "
                "best-accuracy threshold on Siamese Lab's bundled sample of 479 Quora pairs (accuracy 0.82 there).")
    if not validation:
        return "No held-out metrics were recorded for this model."
    if data.get("val_name"):
        source = f"Validation pairs of the validation file {_code(data['val_name'])}"
        where = "given beside the training data"
    else:
        source = f"Held-out validation pairs of {_code(data.get('name', 'the training data'))}"
        where = f"{_number(data.get('val_pairs'))} held out of {_number(data.get('pairs'))}" + (
            ", split so that no validation question occurs in training" if recorded_by_question(
                part(config, "run")) else "")
    text = (f"{source}: {_number(validation.get('n', data.get('val_pairs')))} pairs the model did not train on "
            f"({where}). The threshold is the best-accuracy {'probability' if cross else 'cosine'} threshold on these "
            f"same pairs.\n\n{_metrics(validation, metrics)}")
    return text + (f"\n\nTest pairs ({_number(data.get('test_pairs'))} pairs, neither trained nor calibrated on), at "
                   f"that threshold:\n\n{_metrics(test)}" if test else "")


def _training(config: dict) -> str:
    """The training data, loss, hyperparameters and how training ended."""
    data, settings, training = part(config, "data"), part(config, "train_config"), part(config, "training")
    implied = (f" (of them {_number(data['implied_pairs'])} implied by the training labels)"
               if data.get("implied_pairs") else "")
    recipe = [f"- **Recipe:** {augmented_line(config)}"] if augmented_line(config) else []
    lines = ["### Training Dataset", ""] + ([
        f"- **Name:** {_code(data.get('name', 'n/a'))}",
        f"- **Size:** {_number(data.get('pairs'))} pairs ({_number(data.get('unique_questions'))} distinct questions)",
        f"- **Duplicate share:** {_number(data.get('duplicate_rate'), 1, 100)} % ({_number(data.get('duplicates'))} "
        "duplicate pairs)",
        f"- **Splits:** {_number(data.get('train_pairs'))} training{implied}, {_number(data.get('val_pairs'))} "
        f"validation, {_number(data.get('test_pairs'))} test pairs",
        *recipe] if data else ["Not recorded."])
    lines += ["", "### Loss", "", f"- {loss_line(config)}", "", "### Hyperparameters", ""]
    for label, key in (("epochs", "epochs"), ("batch size", "batch_size"), ("learning rate", "lr"),
                       ("warm-up ratio", "warmup_ratio"), ("seed", "seed")):
        value = settings.get(key)
        if key in settings:
            shown = f"{value:g}" if isinstance(value, float) and math.isfinite(value) else _number(value)
            lines.append(f"- **{label}:** {_code(value) if isinstance(value, str) else shown}")
    if training:
        lines.append(f"- **training ended:** {_code(training.get('status', 'n/a'))} after "
                     f"{_number(training.get('epochs_run'))} epoch(s), best epoch "
                     f"{_number(training.get('best_epoch'))}")
    return "\n".join(lines)


def model_card(manifest: dict, folder_name: str = "") -> str:
    """README.md of an export, from its manifest (``manifest["config"]`` is the run's config summary)."""
    from core.model_names import MODEL_LABELS, ZERO_SHOT_LABEL

    config, fmt, family, zero_shot = (manifest[key] for key in ("config", "export_format", "model_type", "zero_shot"))
    cross = family == "cross-encoder"  # scores a pair in one pass: no vectors, a probability
    label = ZERO_SHOT_LABEL if zero_shot else MODEL_LABELS.get(family, family)
    data, threshold, length = part(config, "data"), manifest["threshold"], manifest["max_length"]
    local_base = part(config, "base_model").get("name")  # a local BERT folder fine-tuned instead of MiniLM
    base = BASE_MODEL if family in ("minilm", "cross-encoder") and not local_base else None
    parent = part(config, "parent")  # the saved model the run started from
    library = "sentence-transformers" if fmt == "sentence-transformers" else "onnx"
    kind = "fixed zero-shot cosine" if zero_shot else "calibrated probability" if cross else "calibrated cosine"
    task = "text-classification" if cross else "sentence-similarity"
    front = ["---", f"library_name: {library}", f"pipeline_tag: {task}",
             "tags:", "- siamese-lab", "- sentence-similarity", "- duplicate-questions",
             f"- {'text-classification' if cross else 'feature-extraction'}", f"- {library}",
             *([f"base_model: {base}"] if base else []),
             *(["datasets:", f"- {json.dumps(_plain(data['name'], 120))}"] if data.get("name") else []), "---"]
    details = [
        f"- **Model family:** {label} (`{family}`)",
        "- **Base model:** " + (f"[{base}](https://huggingface.co/{base})" if base else
                                f"{_code(local_base, 120)} (a local BERT folder)" if local_base else
                                f"none (trained from scratch{', then fine-tuned' if parent else ''})"),
        *([f"- **Parent model:** Fine-tuned from {_code(parent.get('name') or 'a saved model', 120)} "
           f"(validation ROC AUC {_number(parent.get('validation_roc_auc'))})."] if parent else []),
        f"- **Maximum sequence length:** {length} tokens" + (" per question" if cross else ""),
        *(["- **Output:** the duplicate probability of the pair (sigmoid of one logit); no vectors"] if cross else
          [f"- **Output dimensionality:** {manifest['embedding_dim']}", "- **Similarity function:** cosine similarity"
           + (" (the vectors are L2-normalised)" if manifest["normalized"] else "")]),
        f"- **Duplicate threshold ({kind}):** {threshold:.6f}" if threshold is not None
        else "- **Duplicate threshold:** none calibrated"]
    limits = [
        "- Intended use: deciding whether two short questions ask the same thing (duplicate detection)"
        + (", and confirming the candidate pairs a bi-encoder finds in a corpus (it cannot search one itself)."
           if cross else ", and finding similar questions by cosine similarity of their vectors."),
        f"- {'The threshold was set on Quora questions' if zero_shot else 'Trained on Quora questions'}: on other "
        "kinds of text (other sites, long documents, other languages) expect lower quality; **recalibrate the "
        "threshold on your data** (a few hundred labelled pairs of your own) before trusting its verdicts.",
        f"- Texts longer than {length} tokens are cut to their first {length}.",
        "- " + ("Its probability is as calibrated as its training pairs are like yours" if cross else
                "A similarity score is not a probability") + "; duplicate labels in the training data are noisy."]
    shipped = "ONNX graphs for onnxruntime" if fmt == "onnx" else "a sentence-transformers folder"
    what = ("all-MiniLM-L6-v2 as published (not trained in Siamese Lab)" if zero_shot
            else f"a {label} trained in Siamese Lab to tell duplicate questions apart")
    sections = [
        "\n".join(front), f"# {_code(_plain(manifest['name'], 120) or 'model')}: {label}",
        f"This is {what}, exported as {shipped}. "
        + (CROSS_ENCODER_WORDS if cross else f"It maps a question to a vector of {manifest['embedding_dim']} numbers; "
           "two questions whose cosine similarity is above the threshold are called duplicates."),
        "## Model Details", "### Model Description", "\n".join(details), _files(manifest, cross),
        "## Usage", f"### Direct Usage ({'ONNX Runtime' if fmt == 'onnx' else 'Sentence Transformers'})",
        f"```bash\npip install {'onnxruntime tokenizers numpy' if fmt == 'onnx' else library}\n```",
        _usage(manifest, folder_name), "## Evaluation", _evaluation(manifest, config, cross),
        "## Training Details", "Not trained in Siamese Lab: the published all-MiniLM-L6-v2 weights (trained by the "
        "sentence-transformers authors on about one billion sentence pairs)." if zero_shot else _training(config),
        "## Intended Use and Limitations", "\n".join(limits), "## Siamese Lab",
        f"Exported on {manifest['exported_at']} by Siamese Lab (`python -m core export`). `{MANIFEST_FILE}` holds the "
        "threshold and the run's settings and metrics."]
    return "\n\n".join(sections) + "\n"

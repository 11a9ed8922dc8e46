"""The Verdict page's blocks: the slider's start, the question form and verdict, the threshold on held-out pairs, the
error analysis and a scored file. Each function imports the scikit-learn and PyTorch modules it uses, so the form
draws before they load."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import streamlit as st

from core.saving.safe_csv import safe_csv
from lab import cached, figures
from lab.session import ZERO_SHOT, held_out_pairs, show_error, upload_limit_bytes

if TYPE_CHECKING:
    from core.inference.calibration import Calibrated

PERSIST = "session"  # the typed questions and the threshold survive a visit to another page
CHECKED = "verdict_checked"  # session key: the (question1, question2) the verdict was computed for
DEFAULT_QUESTIONS = {"question1": "How do I learn Python?", "question2": "What is the best way to learn Python?"}
ERROR_ROWS = 20  # worst false positives / negatives shown (the download holds them all)
SCORED_FILE = "verdict_scored_file"  # session key: the last file scored (``_score_upload``), kept across page visits


# ---- the threshold the slider starts at --------------------------------------------------------
def held_out(choice: str, pairs) -> cached.HeldOutScores:
    """``cached.held_out_scores`` of a model; the page stops, saying why, when they cannot be scored."""
    try:
        return cached.held_out_scores(choice, pairs)
    except Exception as error:
        show_error(f"Could not score the held-out pairs: {error}")
        st.stop()


def calibrated_threshold(choice: str, config: dict, pairs) -> Calibrated:
    """``cached.judged_threshold``, or the model's own default after showing why pairs could not be scored."""
    try:
        return cached.judged_threshold(choice, config, pairs)
    except Exception as error:
        show_error(f"Could not score the held-out pairs: {error}")
        return cached.judged_threshold(choice, config, None)


def threshold_caption(choice: str, calibrated: Calibrated) -> str:
    """Where the calibrated threshold came from (``Calibrated.source``), and what that means for zero-shot."""
    text = f"Calibrated threshold of this model: {calibrated.threshold:.3f} ({calibrated.source})."
    if choice == ZERO_SHOT and calibrated.pairs and held_out_pairs("test")[0] is not None:
        text += (" Zero-shot MiniLM has no validation split of its own, so it is calibrated on these labelled "
                 "pairs; it is measured below on the test file, which the calibration never saw.")
    elif choice == ZERO_SHOT and calibrated.pairs:
        text += (" Zero-shot MiniLM has no validation split of its own, so it is calibrated on the pairs "
                 "measured below: their accuracy at it is optimistic.")
    elif choice == ZERO_SHOT:
        text += " Load a dataset with labelled duplicates and non-duplicates to calibrate it on your pairs."
    return text


# ---- the questions and the verdict -------------------------------------------------------------
def question_form() -> tuple[str, str]:
    """Both questions in one form: they reach the page together, when **Check** is pressed; the pair
    then checked is remembered in ``st.session_state[CHECKED]``. Returns the questions shown."""
    for key, text in DEFAULT_QUESTIONS.items():
        st.session_state.setdefault(key, text)
    with st.form("verdict_form", border=False):
        first, second = st.columns(2)
        question1 = first.text_area("Question 1", key="question1", height=100, persist_state=PERSIST)
        question2 = second.text_area("Question 2", key="question2", height=100, persist_state=PERSIST)
        if st.form_submit_button("Check", key="check", type="primary", icon=":material/balance:"):
            st.session_state[CHECKED] = (question1, question2)
    return question1, question2


def show_verdict(choice: str, model, question1: str, question2: str, threshold: float) -> None:
    """The verdict on the pair shown, only if it is the pair last checked."""
    if st.session_state.get(CHECKED) != (question1, question2):
        st.info("Press **Check** to get the verdict on these two questions.", icon=":material/balance:")
        return
    if not question1.strip() or not question2.strip():
        st.info("Type a question in both boxes to get a verdict.")
        return
    try:
        with st.spinner("Encoding…"):
            score = cached.pair_score(choice, cached.model_stamp(choice), question1, question2)
    except Exception as error:
        show_error(f"Could not score the pair: {error}")
        return
    score_column, verdict_column = st.columns([1, 3])
    score_column.metric("Duplicate probability" if model.model_type == "cross-encoder" else "Cosine similarity",
                        f"{score:.3f}")
    from core.inference.metrics import predict

    is_duplicate = bool(predict([score], threshold)[0])
    with verdict_column:
        st.header(":green[:material/check_circle: DUPLICATE]" if is_duplicate
                  else ":red[:material/cancel: NOT DUPLICATE]")
        st.caption(f"{score:.3f} is {'above' if is_duplicate else 'not above'} the threshold {threshold:.3f}.")
    st.markdown("**The pair checked** (the verdict is for these two questions; after editing them, press "
                "**Check** again):")
    limit = model.tokenizer.max_length
    for name, text in (("Question 1", question1), ("Question 2", question2)):
        st.text(text)
        count = model.tokenizer.count(text)
        if count > limit:
            st.caption(f"{name} has {count} tokens; it was truncated to {limit} tokens, the most this model reads.")


# ---- the threshold on held-out pairs -----------------------------------------------------------
def show_measurements(measured: cached.HeldOutScores, threshold: float) -> None:
    """Metrics, confusion matrix, score histogram, ROC and PR at ``threshold``, each naming its pairs."""
    from core.inference.metrics import curves, ranking_metrics, threshold_metrics

    st.subheader("This threshold on held-out pairs")
    st.caption(f"Measured on {measured.description}.")
    labels, scores, subtitle = measured.labels, measured.scores, measured.description
    metrics = threshold_metrics(labels, scores, threshold)
    ranking = ranking_metrics(labels, scores)
    shown = {"Accuracy": metrics["accuracy"], "Precision": metrics["precision"], "Recall": metrics["recall"],
             "F1": metrics["f1"], "ROC AUC": ranking["roc_auc"], "Average precision": ranking["average_precision"]}
    for column, (label, value) in zip(st.columns(len(shown)), shown.items()):
        column.metric(label, f"{value:.3f}" if np.isfinite(value) else "—")  # NaN: one class only
    left, right = st.columns(2)
    left.plotly_chart(figures.confusion_figure(metrics, subtitle=subtitle), key="confusion",
                      config=figures.PLOTLY_CONFIG)
    right.plotly_chart(figures.score_histogram(labels, scores, threshold, title="Scores of these pairs",
                                               subtitle=subtitle), key="histogram", config=figures.PLOTLY_CONFIG)
    if len(set(labels.tolist())) < 2:
        st.info("These pairs hold only one class, so there is no ROC or precision-recall curve.")
        return
    points = curves(labels, scores)
    left, right = st.columns(2)
    left.plotly_chart(figures.roc_figure(points["roc"], metrics, ranking["roc_auc"], subtitle=subtitle),
                      key="roc", config=figures.PLOTLY_CONFIG)
    right.plotly_chart(figures.pr_figure(points["pr"], metrics, ranking["average_precision"],
                                         subtitle=subtitle), key="pr", config=figures.PLOTLY_CONFIG)


# ---- error analysis ----------------------------------------------------------------------------
SCORE_FORMAT = {"score": st.column_config.NumberColumn("score", format="%.3f"),
                "accuracy": st.column_config.NumberColumn("accuracy", format="%.3f")}


def _seen_note(choice: str, measured: cached.HeldOutScores) -> str:
    from core.inference import analysis

    if measured.training_pairs is not None:
        return (f"“{analysis.SEEN_COLUMN}”: how many of a pair's two questions (after normalising) occur in the "
                f"{measured.training_pairs:,} pairs this model trained on.")
    if choice == ZERO_SHOT:
        return ("Zero-shot MiniLM was trained outside the lab: which of these questions its pretraining saw is "
                "not known.")
    return ("Which of these questions this model's training saw is not known: it did not train on the active "
            "dataset (or its folder does not record the split it trained on).")


def show_error_analysis(choice: str, measured: cached.HeldOutScores, threshold: float) -> None:
    """The worst false positives and negatives at ``threshold`` (sortable, all of them downloadable),
    the scores by question length, and the accuracy on pairs whose questions training saw or not."""
    from core.inference import analysis

    pairs, labels, scores = measured.pairs, measured.labels, measured.scores
    st.subheader("Error analysis")
    st.caption(f"At the threshold {threshold:.3f}. Measured on {measured.description}. {_seen_note(choice, measured)}")
    for kind, what in ((analysis.FALSE_POSITIVE, "not duplicates scored above the threshold, highest first"),
                       (analysis.FALSE_NEGATIVE, "duplicates scored at or below the threshold, lowest first")):
        table = analysis.error_table(pairs, scores, threshold, kind)
        st.markdown(f"**Worst {kind}s** ({what}): {min(len(table), ERROR_ROWS)} of {len(table):,}")
        if table.empty:
            st.caption(f"No {kind} at this threshold.")
        else:
            st.dataframe(table.head(ERROR_ROWS), key=kind.replace(" ", "_") + "s", column_config=SCORE_FORMAT)
    errors = analysis.all_errors(pairs, scores, threshold)
    st.download_button(f"Download all {len(errors):,} errors (CSV)", safe_csv(errors), key="download_errors",
                       file_name=f"verdict_errors_at_{threshold:.3f}.csv", mime="text/csv",
                       icon=":material/download:", on_click="ignore")

    lengths = analysis.length_buckets(analysis.longer_question_words(pairs))
    figure_column, table_column = st.columns([3, 2])
    figure_column.plotly_chart(figures.length_box_figure(analysis.scores_by_length(pairs, scores), threshold,
                                                         subtitle=measured.description),
                               key="by_length", config=figures.PLOTLY_CONFIG)
    with table_column:
        st.markdown("**Accuracy by length of the longer question** (words)")
        st.dataframe(analysis.accuracy_by_group(labels, scores, threshold, lengths,
                                                order=analysis.length_bucket_names()),
                     hide_index=True, key="accuracy_by_length", column_config=SCORE_FORMAT)
        if analysis.SEEN_COLUMN in pairs:
            st.markdown("**Accuracy by questions seen in training**")
            st.dataframe(analysis.accuracy_by_group(labels, scores, threshold, pairs[analysis.SEEN_COLUMN],
                                                    order=analysis.SEEN_ORDER),
                         hide_index=True, key="accuracy_by_seen", column_config=SCORE_FORMAT)


# ---- a whole file at this threshold --------------------------------------------------------------------
def _forget_scored_file() -> None:
    # on_change of the uploader: the user removed the file (or chose another), so its old result goes.
    if st.session_state.get("score_upload") is None:
        st.session_state.pop(SCORED_FILE, None)


def _score_upload(model, upload, settings: tuple) -> dict | None:
    """``core.inference.scoring.score_file`` of an uploaded file at ``settings`` (model choice, its stamp,
    threshold): its name, report and scored CSV, with the upload's id; None after showing why not."""
    import tempfile
    from pathlib import Path

    from core.data import DataError
    from core.inference.scoring import ScoreSteps, score_file

    with tempfile.TemporaryDirectory() as folder:
        source, out = Path(folder) / "pairs", Path(folder) / "scored.csv"
        source.write_bytes(upload.getvalue())
        note = st.empty()
        note.caption("Scoring…")
        try:
            report = score_file(model, source, out, settings[2], max_bytes=upload_limit_bytes(),
                                steps=ScoreSteps(writing=lambda done, _: note.caption(f"Scored {done:,} pairs…")))
        except DataError as error:
            show_error(f"{upload.name}: {error}")
            return None
        finally:
            note.empty()
        return {"upload": upload.file_id, "name": upload.name, "settings": settings, "report": report,
                "data": out.read_bytes()}


def score_file_panel(choice: str, model, threshold: float) -> None:
    """Upload pairs, get them back scored at ``threshold`` (``core.inference.scoring.score_file``), as a CSV.
    The last result stays in the session (``SCORED_FILE``) until the file is removed or replaced."""
    from pathlib import Path

    st.subheader("Score a whole file at this threshold")
    upload = st.file_uploader("Pairs to score (CSV or TSV, optionally gzip; question1, question2 and, "
                              "optionally, is_duplicate)", key="score_upload", on_change=_forget_scored_file)
    scored, settings = st.session_state.get(SCORED_FILE), (choice, cached.model_stamp(choice), threshold)
    if upload is not None and (scored is None or (scored["upload"], scored["settings"]) != (upload.file_id, settings)):
        scored = st.session_state[SCORED_FILE] = _score_upload(model, upload, settings)
    if scored is None:  # nothing uploaded, or a file that could not be scored (said)
        if upload is None:
            st.caption("Every row comes back with its similarity and predicted_duplicate; with labels, the metrics "
                       "too.")
        return
    report, name = scored["report"], scored["name"]
    st.success(f"Scored {report.scored:,} of {report.rows:,} pairs at threshold {scored['settings'][2]:.3f} ({name})"
               + (f"; {report.skipped_empty:,} with an empty question were left unscored." if report.skipped_empty
                  else "."))
    if upload is None:  # back from another page: the uploader is empty, the result is the one kept
        st.caption(f"{name} was scored earlier in this session"
                   + ("." if scored["settings"] == settings else " with another model or threshold than the ones "
                      "chosen now: upload it again to score it with these."))
    if report.metrics:
        m = report.metrics
        st.caption(f"On its {report.labelled:,} labelled pairs: ROC AUC {m['roc_auc']:.3f} · accuracy "
                   f"{m['accuracy']:.3f} · F1 {m['f1']:.3f}")
    st.download_button("Download the scored pairs (CSV)", scored["data"], file_name=f"scored_{Path(name).stem}.csv",
                       mime="text/csv", key="score_download")

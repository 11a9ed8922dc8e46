"""Verdict: two questions, one cosine similarity, DUPLICATE or NOT DUPLICATE at a threshold, and what
that threshold does on validation pairs."""
import streamlit as st

from lab.session import setup_page

setup_page("Verdict")

from core.metrics import curves, predict, ranking_metrics, threshold_metrics  # noqa: E402
from core.models import ZERO_SHOT_THRESHOLD  # noqa: E402
from lab import cached, figures  # noqa: E402
from lab.session import ZERO_SHOT, get_model, model_picker, show_error  # noqa: E402

DEFAULT_THRESHOLD = 0.5  # for a saved model with no calibrated threshold (trained without a validation split)

st.title("Duplicate or not?")
st.caption("Type two questions. The model turns each into a vector; the verdict is DUPLICATE when their "
           "cosine similarity is above the threshold.")

choice = model_picker("verdict_choice")
try:
    with st.spinner("Loading the model…"):
        model, config = get_model(choice)
except Exception as error:  # a broken or half-written model folder
    show_error(f"Could not load “{st.session_state.verdict_choice}”: {error}")
    st.stop()

calibrated = config.get("thresholds", {}).get("accuracy")
if calibrated is None:
    calibrated = ZERO_SHOT_THRESHOLD if choice == ZERO_SHOT else DEFAULT_THRESHOLD
calibrated = min(max(float(calibrated), -1.0), 1.0)
# A new model brings its own calibrated threshold; the slider keeps the user's value otherwise.
if st.session_state.get("verdict_model") != choice or "threshold" not in st.session_state:
    st.session_state.threshold = round(calibrated, 2)
    st.session_state.verdict_model = choice

first_box, second_box = st.columns(2)
question1 = first_box.text_area("Question 1", value="How do I learn Python?", key="question1", height=100)
question2 = second_box.text_area("Question 2", value="What is the best way to learn Python?", key="question2",
                                 height=100)
threshold = st.slider("Threshold: duplicate when the similarity is above it", min_value=-1.0, max_value=1.0,
                      step=0.01, key="threshold",
                      help="Starts at the model's calibrated threshold (best accuracy on its validation split).")
st.caption(f"Calibrated threshold of this model: {calibrated:.3f}"
           + (" (zero-shot MiniLM: calibrated on the bundled sample)" if choice == ZERO_SHOT else ""))

verdict_column, validation_column = st.columns([2, 3], gap="large")

# ---- the verdict -------------------------------------------------------------------------------
with verdict_column:
    if not question1.strip() or not question2.strip():
        st.info("Type a question in both boxes to get a verdict.")
    else:
        try:
            with st.spinner("Encoding…"):
                score = cached.pair_score(choice, cached.model_stamp(choice), question1, question2)
        except Exception as error:
            show_error(f"Could not score the pair: {error}")
        else:
            st.metric("Cosine similarity", f"{score:.3f}")
            is_duplicate = bool(predict([score], threshold)[0])
            if is_duplicate:
                st.header(":green[:material/check_circle: DUPLICATE]")
            else:
                st.header(":red[:material/cancel: NOT DUPLICATE]")
            st.caption(f"{score:.3f} is {'above' if is_duplicate else 'not above'} "
                       f"the threshold {threshold:.2f}.")
            st.markdown("**The pair, as typed:**")
            limit = model.tokenizer.max_length
            for name, text in (("Question 1", question1), ("Question 2", question2)):
                st.text(text)
                count = model.tokenizer.count(text)
                if count > limit:
                    st.caption(f"{name} has {count} tokens; it was truncated to {limit} tokens, the most this "
                               "model reads.")

# ---- the threshold on validation pairs ---------------------------------------------------------
with validation_column:
    pairs = st.session_state.pairs
    chosen, description = cached.verdict_pairs(pairs)
    st.subheader("This threshold on validation pairs")
    st.caption(f"Measured on {description}. A model trained on this dataset may have seen some of these "
               "pairs in training, so its numbers can look better than on new data.")
    try:
        labels, scores = cached.validation_scores(choice, cached.model_stamp(choice),
                                                  cached.active_data_key(pairs), pairs)
    except Exception as error:
        show_error(f"Could not score the validation pairs: {error}")
        st.stop()
    metrics = threshold_metrics(labels, scores, threshold)
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Accuracy", f"{metrics['accuracy']:.3f}")
    m2.metric("Precision", f"{metrics['precision']:.3f}")
    m3.metric("Recall", f"{metrics['recall']:.3f}")
    m4.metric("F1", f"{metrics['f1']:.3f}")
    st.plotly_chart(figures.confusion_figure(metrics), key="confusion")
    st.plotly_chart(figures.score_histogram(labels, scores, threshold), key="histogram")
    if len(set(labels.tolist())) < 2:
        st.info("These pairs hold only one class, so there is no ROC or precision-recall curve.")
    else:
        fpr, tpr, precision, recall = figures.operating_point(metrics)
        points, ranking = curves(labels, scores), ranking_metrics(labels, scores)
        roc_column, pr_column = st.columns(2)
        roc_column.plotly_chart(figures.roc_figure(points["roc"], (fpr, tpr), ranking["roc_auc"]), key="roc")
        pr_column.plotly_chart(figures.pr_figure(points["pr"], (recall, precision), ranking["average_precision"]),
                               key="pr")

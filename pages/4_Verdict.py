"""Verdict: two questions, one cosine similarity, DUPLICATE or NOT DUPLICATE at a threshold; what that
threshold does on the pairs the model's training held out, and which of them it gets wrong."""
import streamlit as st

from core.models import ZERO_SHOT_THRESHOLD
from lab import cached, export_view, verdict_view
from lab.session import (
    ZERO_SHOT,
    enter_through_app,
    get_model,
    model_picker,
    show_error,
)

enter_through_app(__file__)

DEFAULT_THRESHOLD = 0.5  # for a saved model with no calibrated threshold (trained without a validation split)

st.title("Duplicate or not?")
st.caption("Type two questions and press **Check**. The model turns each into a vector; the verdict is DUPLICATE "
           "when their cosine similarity is above the threshold.")

choice = model_picker()  # the one model of every analysis page
try:
    with st.spinner("Loading the model…"):
        model, config = get_model(choice)
except Exception as error:  # a broken or half-written model folder
    show_error(f"Could not load “{choice}”: {error}")
    st.stop()

with st.expander("Export this model (sentence-transformers or ONNX, with a model card)"):
    export_view.export_panel(choice, config)

calibrated = config.get("thresholds", {}).get("accuracy")
if calibrated is None:
    calibrated = ZERO_SHOT_THRESHOLD if choice == ZERO_SHOT else DEFAULT_THRESHOLD
calibrated = min(max(float(calibrated), -1.0), 1.0)
# A new model brings its own calibrated threshold; the slider keeps the user's value otherwise.
if st.session_state.get("verdict_model") != choice or "threshold" not in st.session_state:
    st.session_state.threshold = round(calibrated, 2)
    st.session_state.verdict_model = choice

question1, question2 = verdict_view.question_form()
threshold = st.slider("Threshold: duplicate when the similarity is above it", min_value=-1.0, max_value=1.0,
                      step=0.01, key="threshold", persist_state=verdict_view.PERSIST,
                      help="Starts at the model's calibrated threshold (best accuracy on its validation split).")
st.caption(f"Calibrated threshold of this model: {calibrated:.3f}"
           + (" (zero-shot MiniLM: calibrated on the bundled sample)" if choice == ZERO_SHOT else ""))

# ---- the verdict, on the pair last checked -----------------------------------------------------
verdict_view.show_verdict(choice, model, question1, question2, threshold)

verdict_view.score_file_panel(model, threshold)

# ---- the threshold on held-out pairs, and the errors it makes ----------------------------------
st.divider()
pairs = st.session_state.pairs
try:
    measured = cached.held_out_scores(choice, cached.model_stamp(choice), cached.active_data_key(pairs), pairs)
except Exception as error:
    show_error(f"Could not score the held-out pairs: {error}")
    st.stop()
verdict_view.show_measurements(measured, threshold)
st.divider()
verdict_view.show_error_analysis(choice, measured, threshold)

"""Verdict: two questions, one cosine similarity, DUPLICATE or NOT DUPLICATE at a threshold; what that
threshold does on pairs the model never trained on, and which of them it gets wrong."""
import streamlit as st

from lab import export_view, verdict_view
from lab.session import enter_through_app, model_or_stop, model_picker
from lab.workspace_state import kept, start_slider_at

enter_through_app(__file__)

st.title("Duplicate or not?")
st.caption("Type two questions and press **Check**. The model turns each into a vector; the verdict is DUPLICATE "
           "when their cosine similarity is above the threshold.")

choice = model_picker(vectors=False)  # the one model of every analysis page; a cross-encoder's score is its own
# The questions can be typed at once: the model (PyTorch, the weights) loads after the form is drawn.
question1, question2 = verdict_view.question_form()
model, config = model_or_stop(choice)

with st.expander("Export this model (sentence-transformers or ONNX, with a model card)"):
    export_view.export_panel(choice, config)

# Zero-shot MiniLM has no validation split of its own: its threshold is calibrated on the active dataset's
# labelled pairs, so their scores come before the slider (cached: scored once per model and dataset). The Label
# page reads the same threshold.
pairs = st.session_state.pairs
calibrated = verdict_view.calibrated_threshold(choice, config, pairs)
start_slider_at("threshold", choice, calibrated.threshold)

threshold = st.slider("Threshold: duplicate when the similarity is above it", min_value=-1.0, max_value=1.0,
                      step=0.001, format="%.3f", **kept("threshold"), persist_state=verdict_view.PERSIST,
                      help="Starts at the model's calibrated threshold: best accuracy on its validation split "
                           "(zero-shot MiniLM's on your labelled pairs).")
st.caption(verdict_view.threshold_caption(choice, calibrated))

# ---- the verdict, on the pair last checked -----------------------------------------------------
verdict_view.show_verdict(choice, model, question1, question2, threshold)

verdict_view.score_file_panel(choice, model, threshold)

# ---- the threshold on held-out pairs, and the errors it makes ----------------------------------
st.divider()
measured = verdict_view.held_out(choice, pairs)
if measured.pairs.empty:  # no figure rather than one measured on pairs the model trained on
    st.subheader("This threshold on held-out pairs")
    st.warning(f"Nothing is measured: {measured.description}.")
    st.stop()
verdict_view.show_measurements(measured, threshold)
st.divider()
verdict_view.show_error_analysis(choice, measured, threshold)

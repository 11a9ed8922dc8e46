"""Home: what the lab is, and where to start (the default page of `streamlit run app.py`)."""
import streamlit as st

from core.models import MODEL_LABELS
from lab import workspace_state
from lab.loss_menu import LOSS_CHOICES
from lab.navigation import PAGES
from lab.session import enter_through_app

enter_through_app(__file__)

state = st.session_state

st.title("Siamese Lab")
st.write(
    "Find duplicate questions with **Siamese networks**. Two questions go through an encoder that turns each "
    "into a vector of unit length; the cosine of the two vectors is their similarity, and a pair is called a "
    "duplicate when the similarity is above a threshold calibrated on held-out pairs. Training pulls the "
    "vectors of duplicate questions together and pushes the other questions of the batch away."
)

models_column, losses_column = st.columns(2)
with models_column:
    st.subheader("Four models")
    st.markdown(
        f"- **{MODEL_LABELS['lstm']}**: one set of weights for both questions; word embeddings → LSTM → mean over "
        "the real tokens → L2-normalise.\n"
        f"- **{MODEL_LABELS['dual-transformer']}**: two independent transformer towers, one per side; the [CLS] state "
        "is projected to the output vector.\n"
        f"- **{MODEL_LABELS['minilm']}**: the pretrained all-MiniLM-L6-v2 sentence encoder, usable zero-shot "
        "(no training) or fine-tuned on your pairs.\n"
        f"- **{MODEL_LABELS['cross-encoder']}**: MiniLM reading both questions together, one probability per pair; "
        "no vectors, so it scores pairs and confirms the ones a bi-encoder finds."
    )
with losses_column:
    st.subheader(f"{len(LOSS_CHOICES)} losses")  # the Train page's menu, read from the same list
    st.markdown("\n".join(f"- **{choice.label}**: {choice.help}" for choice in LOSS_CHOICES.values()))

st.subheader("How to use the lab")
for number, lab_page in enumerate(PAGES[1:], start=1):
    workspace_state.page_link(lab_page, label=f"{number}. {lab_page.title} — {lab_page.purpose}")

st.subheader("Active dataset")
st.write(f"**{state.data_name}**: {len(state.pairs):,} question pairs, "
         f"{int(state.pairs['is_duplicate'].sum()):,} of them labelled duplicates. "
         "Trained models, labels and settings are kept in this workspace (see the sidebar).")

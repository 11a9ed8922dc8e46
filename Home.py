"""Home page of the Siamese Lab: what the lab is, and where to start. Run with `streamlit run Home.py`."""
from pathlib import Path

import streamlit as st

from lab.session import setup_page

setup_page("Home")

from core.models import MODEL_LABELS  # noqa: E402

state = st.session_state
HERE = Path(__file__).resolve().parent

st.title("Siamese Lab")
st.write(
    "Find duplicate questions with **Siamese networks**. Two questions go through an encoder that turns each "
    "into a vector of unit length; the cosine of the two vectors is their similarity, and a pair is called a "
    "duplicate when the similarity is above a threshold calibrated on held-out pairs. Training pulls the "
    "vectors of duplicate questions together and pushes the other questions of the batch away."
)

models_column, losses_column = st.columns(2)
with models_column:
    st.subheader("Three models")
    st.markdown(
        f"- **{MODEL_LABELS['lstm']}**: one set of weights for both questions; word embeddings → LSTM → mean over "
        "the real tokens → L2-normalise.\n"
        f"- **{MODEL_LABELS['dual-transformer']}**: two independent transformer towers, one per side; the [CLS] state "
        "is projected to the output vector.\n"
        f"- **{MODEL_LABELS['minilm']}**: the pretrained all-MiniLM-L6-v2 sentence encoder, usable zero-shot "
        "(no training) or fine-tuned on your pairs."
    )
with losses_column:
    st.subheader("Three losses")
    st.markdown(
        "- **Triplet loss with hard negatives**: each duplicate pair is an anchor and its positive; the other "
        "questions of the batch are negatives. It adds a term for the *mean* negative and one for the *closest* "
        "negative (L_full = L1 + L2), each with a margin.\n"
        "- **Contrastive loss**: pairs of both classes; duplicates are pulled together, non-duplicates pushed "
        "beyond a margin, in two forms (squared hinge, or margin squared).\n"
        "- **In-batch softmax**: a cross-entropy in which each question must pick its own duplicate among all the "
        "batch's candidates (the diagonal of the similarity matrix)."
    )

st.subheader("How to use the lab")
PAGES = [
    ("pages/1_Data.py", "1. Data — keep the bundled sample or upload your own CSV / TSV pairs", ":material/table_view:"),
    ("pages/2_Train.py", "2. Train — pick a model, a loss and hyperparameters; watch the loss live", ":material/model_training:"),
    ("pages/3_Similarity_matrix.py", "3. Similarity matrix — see one batch through the losses", ":material/grid_on:"),
    ("pages/4_Verdict.py", "4. Verdict — type two questions and get same / not the same", ":material/balance:"),
    ("pages/5_Search.py", "5. Search — find the stored questions closest to a new one", ":material/search:"),
    ("pages/6_Compare.py", "6. Compare — every trained model and two baselines, scored on the same pairs", ":material/bar_chart:"),
    ("pages/7_Map.py", "7. Map — the dataset's questions as a 2-D map of the model's vectors", ":material/scatter_plot:"),
    ("pages/8_Deduplicate.py", "8. Deduplicate — group a corpus's near-duplicate questions into clusters", ":material/join_inner:"),
]
for path, label, icon in PAGES:
    if (HERE / path).is_file():  # a page link to a missing file would stop the home page
        st.page_link(path, label=label, icon=icon)

st.subheader("Active dataset")
st.write(f"**{state.data_name}**: {len(state.pairs):,} question pairs, "
         f"{int(state.pairs['is_duplicate'].sum()):,} of them labelled duplicates. "
         f"Trained models are saved in `{state.runs_root}`.")

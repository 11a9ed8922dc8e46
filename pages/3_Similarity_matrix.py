"""Similarity matrix: one batch of duplicate pairs, every s(v1_i, v2_j), and the triplet loss row by row."""
import pandas as pd
import streamlit as st

from core.inference.analysis import SEED_EXAMPLE, inspect_scores, pick_batch, seed_experiment
from lab import cached, figures
from lab.session import enter_through_app, model_picker, show_error
from lab.workspace_state import keep_widget, kept

enter_through_app(__file__)

MARKS = (
    "**Reading the matrix.** Row *i* is question1 of pair *i* (the anchor, v1), column *j* is question2 of "
    "pair *j* (v2). The **black outlines** on the diagonal are the duplicate pairs, s(A, P); every other cell "
    "is an in-batch negative. **◆ with an orange dotted outline** marks each row's *closest negative*; the "
    "narrow column on the right is each row's *mean negative*. Colours run from red (−1) through white (0) "
    "to blue (+1). Hover a cell to read both questions.")
NEGATIVES = (
    "**Mean negative**: the average of a row's off-diagonal scores — how similar the anchor is, on "
    "average, to questions that are not its duplicate. It drives L1 = max(mean neg − s(A,P) + α, 0) and "
    "pushes the whole crowd of negatives down. **Closest negative**: the highest off-diagonal score that is "
    "still *below* s(A,P) — the most confusing wrong answer the model still ranks correctly. It drives "
    "L2 = max(closest neg − s(A,P) + α, 0), the hard part of the lesson. A row with no such cell (every "
    "negative scores at least as high as the positive) has no closest negative and L2 = 0.")

# The loss columns stay in view: the question is narrow (hover shows it whole), the numbers small.
BATCH_COLUMNS = {"question1": st.column_config.TextColumn(width="medium"),
                 **{c: st.column_config.NumberColumn(format="%.4f", width="small")
                    for c in ("s(A,P)", "mean negative", "closest negative", "L1", "L2", "L_full")}}

st.title("Similarity matrix")
st.caption("A batch of duplicate pairs as the training loss sees it: the numbers come from `core.losses`, "
           "the same functions training calls.")

pairs = st.session_state.pairs
EXAMPLE_SCORES = "example_scores"  # the worked example's scores as last edited (not a widget key)


def loss_metrics(batch_view, *labels: str) -> None:
    values = (batch_view.triplet_loss, batch_view.triplet_cost, batch_view.softmax_loss)
    for column, label, value in zip(st.columns(3), labels, values):
        column.metric(label, f"{value:.4f}")


def _next_seed() -> None:
    st.session_state.sim_seed = int(st.session_state.get("sim_seed", 0)) + 1
    keep_widget("sim_seed")  # a value set by a button, not by its widget: kept here


# ---- controls ----------------------------------------------------------------------------------
choice = model_picker()

left, middle, right = st.columns(3)
with left:
    batch_size = st.slider("Pairs in the batch", min_value=4, max_value=32, step=1, **kept("sim_batch_size"),
                           persist_state="session")
    pick = st.radio("Pick the batch", ["random", "by index"], **kept("pick"), persist_state="session", horizontal=True)
with middle:
    duplicates = int((pairs["is_duplicate"] == 1).sum())
    if pick == "random":
        seed = st.number_input("Random seed", min_value=0, step=1, **kept("sim_seed"),
                               persist_state="session")
        st.button("Another random batch", icon=":material/casino:", key="reshuffle", on_click=_next_seed)
    else:
        last_start = max(int(duplicates) - 2, 0)
        if st.session_state.get("sim_start", 0) > last_start:  # kept for a larger dataset: this one starts over
            st.session_state.sim_start = 0
        start = st.number_input("Start at duplicate pair number", min_value=0, max_value=last_start, step=1,
                                **kept("sim_start"), persist_state="session",
                                help=f"The dataset has {duplicates:,} duplicate pairs; 0 is the first one.")
with right:
    margin = st.slider("Margin α", min_value=0.0, max_value=1.0, step=0.05, **kept("sim_margin"),
                       persist_state="session")
    softmax_scale = st.number_input("Softmax scale", min_value=0.1, max_value=100.0, step=0.5,
                                    **kept("softmax_scale"), persist_state="session",
                                    help="Scores are multiplied by this before the in-batch softmax (training "
                                         "uses 20 by default; the worked example uses 1).")

# ---- the batch ---------------------------------------------------------------------------------
batch = None
try:
    where = {"seed": int(seed)} if pick == "random" else {"seed": None, "start": int(start)}
    batch = pick_batch(pairs, batch_size, **where)
except ValueError as error:
    show_error(f"Cannot make a batch from this dataset: {error}. It needs at least two duplicate pairs "
               "with distinct questions.")

view = None
if batch is not None:
    if len(batch) < batch_size:
        st.info(f"Only {len(batch)} distinct duplicate pairs were available from here, so the batch has "
                f"{len(batch)} rows.")
    question1, question2 = batch["question1"].tolist(), batch["question2"].tolist()
    try:
        with st.spinner("Encoding the batch…"):
            scores = cached.batch_scores(choice, cached.model_stamp(choice), tuple(question1), tuple(question2))
        view = inspect_scores(scores, margin=margin, softmax_scale=softmax_scale,
                              question1=question1, question2=question2)
    except Exception as error:  # a broken model folder or a failing encoder: say so, no traceback
        show_error(f"Could not score the batch with “{choice}”: {error}")

if view is not None:
    st.plotly_chart(figures.similarity_heatmap(view), key="heatmap")
    st.caption(MARKS)
    loss_metrics(view, "Triplet loss (mean of L_full)", "Triplet cost J (sum of L_full)",
                 f"In-batch softmax loss (scale {softmax_scale:g})")
    st.dataframe(figures.batch_table(view), hide_index=True, key="batch_table", column_config=BATCH_COLUMNS)
    st.caption(f"L1 = max(mean negative − s(A,P) + α, 0), L2 = max(closest negative − s(A,P) + α, 0), "
               f"L_full = L1 + L2, here with α = {margin:.2f}. Moving α recomputes the losses only; the "
               "embeddings are cached.")

# ---- explain mode ------------------------------------------------------------------------------
st.divider()
if st.toggle("Explain mode: the worked 4×4 example", key="explain", persist_state="session"):
    st.markdown(NEGATIVES)
    rows, columns = figures.batch_labels(len(SEED_EXAMPLE))
    example_margin = st.slider("Margin α of the example", min_value=0.0, max_value=1.0, value=0.25, step=0.05,
                               key="example_margin", persist_state="session",
                               help="Its own α, starting at the course's 0.25, so the course's numbers show "
                                    "whatever the batch above uses.")
    st.markdown("Edit any score below (from −1 to 1); everything under it follows.")
    # A data editor has no persist_state and its edits go when the page is left: the page keeps the edited
    # scores under a key of its own and hands them back as the editor's data (its edits are absolute values).
    st.session_state.setdefault(EXAMPLE_SCORES, [list(row) for row in SEED_EXAMPLE])
    edited = st.data_editor(
        pd.DataFrame(st.session_state[EXAMPLE_SCORES], index=rows, columns=columns), key="example",
        column_config={c: st.column_config.NumberColumn(c, min_value=-1.0, max_value=1.0, step=0.01,
                                                        format="%.2f", required=True) for c in columns})
    if edited.isna().to_numpy().any():
        show_error("Every cell of the example needs a number.")
    else:
        example = edited.to_numpy(dtype=float).tolist()
        st.session_state[EXAMPLE_SCORES] = example
        example_view = inspect_scores(example, margin=example_margin, softmax_scale=softmax_scale)
        st.plotly_chart(figures.similarity_heatmap(example_view, title="The worked example"), key="example_heatmap")
        st.dataframe(figures.batch_table(example_view), hide_index=True, key="example_table",
                     column_config=BATCH_COLUMNS)
        loss_metrics(example_view, "Triplet loss (mean)", "Triplet cost J (sum)",
                     f"Softmax loss (scale {softmax_scale:g})")

        st.subheader("What training does to it")
        st.markdown("Each round adds 0.5 to every diagonal score (duplicates get closer) and subtracts 0.02 "
                    "from every other cell (non-duplicates drift apart), as one training step would; a cosine "
                    "stays within −1 and 1, so a score stops there. Both losses fall.")
        rounds = st.slider("Rounds", min_value=0, max_value=4, value=4, step=1, key="rounds", persist_state="session")
        experiment = seed_experiment(example, rounds=rounds, margin=example_margin, softmax_scale=softmax_scale)
        if example_view.triplet_loss == 0:
            st.caption(f"At α = {example_margin:.2f} every row of this matrix already clears the margin, so its triplet "
                       "loss is 0 from the start; raise the example's margin α (try 1.0) to watch it fall too.")
        st.dataframe(experiment, hide_index=True, key="experiment")
        st.plotly_chart(figures.experiment_figure(experiment), key="experiment_chart")

"""Map: the active dataset's distinct questions under a model, in 2-D (PCA), coloured by cluster or by the
label of their pairs; a click or a typed question highlights the nearest neighbours."""
import streamlit as st

from core.data import seeded_sample
from core.inference.analysis import DUPLICATE_LABEL, MAP_MAX_POINTS, MAP_SEED, NOT_DUPLICATE_LABEL, nearest
from lab import cached, map_view
from lab.figures import PLOTLY_CONFIG
from lab.session import enter_through_app, model_picker
from lab.workspace_state import kept

enter_through_app(__file__)

COLOURINGS = ["cluster", "label of its pairs"]
PERSIST = "session"  # a widget's state is dropped when its page is not drawn: these survive a visit elsewhere

st.title("Map of the questions")
st.caption("Every distinct question of the active dataset (both columns) as the model's vector, flattened to "
           "2-D by PCA: questions the model finds similar lie close together. Hover a point to read it; click "
           "one, or type a question, to ring its nearest neighbours (by cosine similarity in the full space, "
           "which the flat map only approximates).")

choice = model_picker()
key, texts = cached.active_questions()
rows = seeded_sample(len(texts), MAP_MAX_POINTS, MAP_SEED)
questions = [texts[i] for i in rows]
sampled = len(questions) < len(texts)
map_key = f"{key}:{len(questions)}"  # the dataset and how many of its questions: every map cache key holds it

colour_column, k_column, n_column = st.columns(3)
colouring = colour_column.selectbox("Colour by", COLOURINGS, **kept("map_colour"), persist_state=PERSIST)
k = k_column.slider("Clusters (k-means)", min_value=2, max_value=20, **kept("map_k"),
                    disabled=colouring != "cluster", persist_state=PERSIST)
count = n_column.slider("Neighbours to highlight", min_value=1, max_value=50, **kept("map_neighbours"),
                        persist_state=PERSIST)
query = st.text_input("Search: highlight the questions closest to", value="", key="map_query",
                      on_change=map_view.forget_click, placeholder="Type a question, or click a point on the map",
                      persist_state=PERSIST)

vectors = cached.encode_with_progress(lambda progress: map_view.encodings(choice, map_key, questions, progress),
                                      "Encoding the questions (once per model and dataset)")
stamp = cached.model_stamp(choice)
layout = map_view.layout(choice, stamp, map_key, k, vectors)
if colouring == "cluster":
    groups = [f"cluster {c + 1}" for c in layout.clusters]
    order = [f"cluster {c + 1}" for c in range(int(layout.clusters.max()) + 1)]
else:
    groups, order = map_view.labels(map_key, st.session_state.pairs, questions), [DUPLICATE_LABEL, NOT_DUPLICATE_LABEL]

clicked = map_view.focus(map_key, len(questions))
highlight, about = None, None
if clicked is not None:
    highlight = nearest(vectors, vectors[clicked], count, exclude=clicked)
    about = f"the clicked question “{questions[clicked]}”"
elif query.strip():
    highlight = nearest(vectors, map_view.query_vector(choice, stamp, query), count)
    about = f"the typed question “{query.strip()}”"

shown = f"{len(questions):,} questions" + (f" (a seeded sample of the {len(texts):,})" if sampled else "")
title = f"{shown} of the active dataset: the closer two points, the more alike the model finds them"
st.session_state[map_view.DATA_KEY] = map_key
figure = map_view.map_figure(layout.points, map_view.hovers(map_key, questions), groups, order, title,
                             highlight, clicked,
                             highlight_name=f"{len(highlight[0]) if highlight else 0} nearest neighbours")
st.plotly_chart(figure, key=map_view.CHART_KEY, on_select=map_view.remember_click, selection_mode="points",
                config=PLOTLY_CONFIG)
if sampled:
    st.caption(f"The dataset has {len(texts):,} distinct questions; the map shows a seeded sample of "
               f"{len(questions):,} (seed {MAP_SEED}) so it stays responsive, and neighbours are searched among them.")
else:
    st.caption(f"All {len(questions):,} distinct questions of the active dataset.")
st.caption(map_view.flattening_note(sum(layout.variance[:2]), vectors.shape[1]))

if highlight is not None:
    st.subheader("Nearest neighbours")
    st.caption(f"The {len(highlight[0])} questions of the map closest to {about}, by cosine similarity.")
    if clicked is not None:
        st.button("Clear the clicked question", key="map_clear", on_click=map_view.forget_click)
    cached.show_ranked([questions[i] for i in highlight[0]], highlight[1], key="map_neighbours_table")

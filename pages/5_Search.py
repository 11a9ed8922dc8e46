"""Search: the questions of the active dataset closest to a typed question, under a chosen model."""
import streamlit as st

from lab import cached
from lab.session import enter_through_app, model_or_stop, model_picker, show_error
from lab.workspace_state import kept

enter_through_app(__file__)

st.title("Search similar questions")
st.caption("Every distinct question of the active dataset (both columns) is encoded once per model and kept "
           "in a FAISS index; a query is encoded the same way and compared by cosine similarity.")

choice = model_picker()
query = st.text_input("Question", value="How can I learn to code?", key="query", persist_state="session")
k = st.slider("Number of results", min_value=1, max_value=50, step=1, **kept("k"), persist_state="session")

key, texts = cached.active_questions()

model, _ = model_or_stop(choice)
index = cached.encode_with_progress(lambda progress: cached.search_index(choice, key, texts, progress=progress),
                                    "Encoding the dataset's questions")
exact = "exact search (FAISS flat inner product)" if index.kind == "flat" else "approximate search (FAISS HNSW graph)"
st.caption(f"{len(index):,} distinct questions indexed; {exact}.")

if not query.strip():
    st.info("Type a question to search for.")
    st.stop()

count = model.tokenizer.count(query)
if count > model.tokenizer.max_length:
    st.caption(f"The question has {count} tokens; it was truncated to {model.tokenizer.max_length} tokens, "
               "the most this model reads.")
try:
    with st.spinner("Searching…"):
        (results,) = index.search(query, k)
except Exception as error:
    show_error(f"The search failed: {error}")
    st.stop()

cached.show_ranked([text for text, _ in results], [score for _, score in results], key="results")

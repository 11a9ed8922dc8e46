"""The names of the vector indexes and the corpus size up to which search is exact, without FAISS: the
command line's parsers offer them, and a command that never searches must start where FAISS is not installed."""
from __future__ import annotations

FLAT_LIMIT = 50_000  # corpus size up to which search is exact
INDEX_KINDS = ("flat", "hnsw", "ivfpq")  # core.inference.vector_index builds each

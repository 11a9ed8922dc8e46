"""``python -m core search`` and ``embed``: over the distinct questions of a corpus, the k most similar
to a question, or every question's vector written to a .npy file."""
from __future__ import annotations

from core.cli.common import (
    TqdmCounter, add_columns_option, add_engine_options, add_output_options, claimed_output, count,
    engine_session, load_backend, load_data, model_command, output_path, print_json, ray_vectors,
    vector_cache, vector_cache_key,
)


def cmd_search(args) -> int:
    from core.data import corpus_questions
    from core.export.onnx_backend import cache_root, search_cache
    from core.inference.search import corpus_vectors, load_or_build, model_identity

    model, _ = load_backend(args)
    texts = corpus_questions(load_data(args.corpus, args))

    def encode(questions, progress):  # only when the index is built: the lab's cached vectors, else encoded
        key = vector_cache_key(args) or model_identity(model)
        return corpus_vectors(questions, model, vector_cache() if key else None, key, progress=progress).second

    # Indexes are kept in the lab's cache, named by the model and the corpus: never in a model folder.
    cache = search_cache(model.digest) if args.backend == "onnx" else cache_root() / "search"
    index = load_or_build(model, texts, cache, progress=TqdmCounter("indexing"), kind=args.index, encode=encode)
    for rank, (text, score) in enumerate(index.search(args.question, args.k)[0], start=1):
        print_json({"rank": rank, "score": round(score, 6), "question": text})
    return 0


def cmd_embed(args) -> int:
    from core.data import corpus_questions
    from core.inference.embedding import embedding_paths, write_embeddings

    vectors, questions, digest = embedding_paths(args.out)
    for path in (vectors, questions, digest):  # no file may be the data read nor inside a model folder
        output_path(str(path), args.data)
    # The three files claimed before any work; they go into place together, each whole, when it ends well.
    with claimed_output([vectors, questions, digest], args.overwrite, create_folder=True) as claim:
        model, _ = load_backend(args)
        texts = corpus_questions(load_data(args.data, args))
        rows = None
        if args.engine == "ray":  # encoded by Ray's actors, then written here the local way
            with engine_session(args):
                rows = ray_vectors(args, texts, unit=False)[0]
        write_embeddings(claim, model, texts, vectors, progress=TqdmCounter("embedding"), rows=rows)
    print_json({"vectors": str(vectors), "questions": str(questions), "sha256": str(digest), "n": len(texts),
                "dim": model.embedding_dim, "engine": args.engine})
    return 0


def add_parsers(sub) -> None:
    from core.inference.search import FLAT_LIMIT, INDEX_KINDS

    search = model_command(sub, "search", "the k questions of a corpus most similar to a question", cmd_search,
                           backend=True)
    search.add_argument("--corpus", required=True, help="pairs file whose distinct questions are searched")
    search.add_argument("question")
    add_columns_option(search, labels=False)
    search.add_argument("-k", type=count, default=10, help="number of results")
    search.add_argument("--index", choices=INDEX_KINDS, default=None,
                        help=f"the corpus's index (kept in the lab's cache): flat (exact), hnsw (approximate graph) "
                             f"or ivfpq (compressed, scores estimated); default: flat up to {FLAT_LIMIT:,} questions, "
                             f"hnsw above")

    embed = model_command(sub, "embed", "write the vectors of a corpus's distinct questions to a .npy file",
                          cmd_embed, backend=True)
    embed.add_argument("--data", required=True, help="pairs file whose distinct questions are embedded")
    add_columns_option(embed, labels=False)
    add_output_options(embed, help="output .npy file (.npy added when missing); the questions and the sha256 go "
                                   "beside it")
    add_engine_options(embed)

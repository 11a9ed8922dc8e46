"""``python -m core search`` and ``embed``: over the distinct questions of a corpus, the k most similar
to a question, or every question's vector written to a .npy file."""
from __future__ import annotations

from pathlib import Path

from core.cli.common import (
    TqdmCounter,
    add_backend_option,
    count,
    load_backend,
    load_data,
    model_command,
    print_json,
)


def _corpus(path: str) -> list[str]:
    from core.data import corpus_questions

    return corpus_questions(load_data(path))


def cmd_search(args) -> int:
    from core.inference.search import load_or_build
    from core.models import ZERO_SHOT

    model, _ = load_backend(args)
    texts = _corpus(args.corpus)
    # Indexes are cached next to the model; zero-shot MiniLM's in the models folder's hidden cache.
    cache = Path(args.runs) / ".cache" / "minilm" if args.model == ZERO_SHOT else Path(args.model)
    cache = Path(model.folder) if args.backend == "onnx" else cache  # the graph's folder: its index goes with it
    index = load_or_build(model, texts, cache, progress=TqdmCounter("indexing"))
    for rank, (text, score) in enumerate(index.search(args.question, args.k)[0], start=1):
        print_json({"rank": rank, "score": round(score, 6), "question": text})
    return 0


def cmd_embed(args) -> int:
    from core.inference.embedding import embed_to_file

    model, _ = load_backend(args)
    texts = _corpus(args.data)
    out = embed_to_file(model, texts, args.out, progress=TqdmCounter("embedding"))
    print_json({"vectors": str(out), "questions": str(out.with_suffix(".questions.jsonl")),
                "n": len(texts), "dim": model.embedding_dim})
    return 0


def add_parsers(sub) -> None:
    """Register ``search`` and ``embed`` on the subparsers ``sub``."""
    search = model_command(sub, "search", "the k questions of a corpus most similar to a question", cmd_search)
    search.add_argument("--corpus", required=True, help="pairs file whose distinct questions are searched")
    search.add_argument("question")
    search.add_argument("-k", type=count, default=10, help="number of results")
    search.add_argument("--runs", default="runs", help="models folder (zero-shot MiniLM caches its index here)")
    add_backend_option(search)

    embed = model_command(sub, "embed", "write the vectors of a corpus's distinct questions to a .npy file",
                          cmd_embed)
    embed.add_argument("--data", required=True, help="pairs file whose distinct questions are embedded")
    embed.add_argument("--out", required=True, help="output .npy file (questions go to <out>.questions.jsonl)")
    add_backend_option(embed)

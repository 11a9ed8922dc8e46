"""The ``sentence-transformers`` export (MiniLM, zero-shot or fine-tuned): the folder
sentence-transformers' own ``save`` writes for Transformer -> mean Pooling -> Normalize around this
model's BertModel, its tokenizer and ``max_seq_length`` = the model's max length;
``SentenceTransformer(folder).encode`` gives this model's ``encode`` (checked on export, within
``ST_TOLERANCE``). Named ``..._folder`` so that it never shadows the ``sentence_transformers`` package."""
from __future__ import annotations

import stat
import tempfile
from pathlib import Path

import numpy as np

from core.export.common import PROBE_TEXTS, TOKENIZER_FILE, ExportError, quiet_export

ST_TOLERANCE = 1e-5  # max |SentenceTransformer.encode - model.encode| over the probe texts


def write_sentence_transformers(model, folder: Path) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import BertTokenizerFast

    try:  # sentence-transformers >= 6; sentence_transformers.models before (deprecated since)
        from sentence_transformers.sentence_transformer import modules as st_models
    except ImportError:
        from sentence_transformers import models as st_models

    max_length = model.tokenizer.max_length
    with quiet_export(), tempfile.TemporaryDirectory(prefix="siamese-lab-st-") as hf:
        model.bert.save_pretrained(hf)  # config.json + model.safetensors, this model's weights
        rust = model.tokenizer.to_hf_tokenizer()
        rust.no_truncation()  # sentence-transformers truncates at max_seq_length itself
        BertTokenizerFast(tokenizer_object=rust, do_lower_case=True, model_max_length=max_length).save_pretrained(hf)
        with torch.random.fork_rng():
            torch.manual_seed(0)  # BertModel's pooler (unused by mean pooling) is initialised: the same each time
            transformer = st_models.Transformer(hf, max_seq_length=max_length)
        modules = [transformer, st_models.Pooling(model.embedding_dim, pooling_mode="mean")] + (
            [st_models.Normalize()] if model.config.normalize else [])
        SentenceTransformer(modules=modules, device="cpu", similarity_fn_name="cosine").save(
            str(folder), create_model_card=False)
        # safetensors creates its file 0600; give it the mode the other files got (0666 less the umask).
        (folder / "model.safetensors").chmod(stat.S_IMODE((folder / "modules.json").stat().st_mode))
        loaded = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
        got = loaded.encode(PROBE_TEXTS, convert_to_numpy=True, show_progress_bar=False)
    want = model.encode(PROBE_TEXTS).numpy()
    difference = float(np.abs(got - want).max())
    if not difference <= ST_TOLERANCE:
        raise ExportError(f"the sentence-transformers folder encodes {difference:.3g} away from the model "
                          f"(more than {ST_TOLERANCE:g}) on the probe texts")
    return {
        "files": {"modules": "modules.json", "weights": "model.safetensors", "tokenizer": TOKENIZER_FILE},
        "modules": ["Transformer", "Pooling (mean)"] + (["Normalize"] if model.config.normalize else []),
        "check": {"texts": len(PROBE_TEXTS), "max_abs_diff_vs_pytorch": difference, "tolerance": ST_TOLERANCE},
    }

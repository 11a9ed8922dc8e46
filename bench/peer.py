"""The peer: fine-tuning MiniLM with sentence-transformers' own trainer, for side-by-side figures.

The fine-tuned weights are copied into our ``MiniLM`` (same BERT, mean pooling, normalise: the
embeddings are identical), so the peer is scored by exactly the same evaluation code as ours.
"""
from __future__ import annotations

import logging
import os
import tempfile
import time
import warnings

import pandas as pd


def fine_tune_peer(loss_name: str, pairs: pd.DataFrame, batch_size: int, epochs: int, lr: float,
                   max_length: int, seed: int = 0):
    """(our MiniLM holding the peer's fine-tuned weights, training seconds)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore")
    for name in ("transformers", "sentence_transformers", "accelerate", "datasets"):
        logging.getLogger(name).setLevel(logging.ERROR)
    from datasets import Dataset, disable_progress_bars
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer import losses

    from core.models import MiniLM
    from core.text.wordpiece_tokenizer import minilm_folder

    disable_progress_bars()
    model = SentenceTransformer(str(minilm_folder()), device="cpu")
    model.max_seq_length = max_length
    if loss_name == "OnlineContrastiveLoss":
        dataset = Dataset.from_dict({"sentence1": pairs["question1"].tolist(), "sentence2": pairs["question2"].tolist(),
                                     "label": pairs["is_duplicate"].astype(int).tolist()})
        loss = losses.OnlineContrastiveLoss(model)
    elif loss_name == "MultipleNegativesRankingLoss":
        dataset = Dataset.from_dict({"anchor": pairs["question1"].tolist(), "positive": pairs["question2"].tolist()})
        loss = losses.MultipleNegativesRankingLoss(model, scale=20.0)
    else:
        raise ValueError(loss_name)
    args = SentenceTransformerTrainingArguments(
        output_dir=tempfile.mkdtemp(prefix="peer_st_"), num_train_epochs=epochs, per_device_train_batch_size=batch_size,
        learning_rate=lr, warmup_steps=0.1, save_strategy="no", eval_strategy="no", report_to=[], disable_tqdm=True,
        use_cpu=True, dataloader_num_workers=0, seed=seed, logging_strategy="no",
    )
    started = time.perf_counter()
    SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset, loss=loss).train()
    seconds = time.perf_counter() - started
    ours = MiniLM.pretrained(max_length=max_length)
    state = {k: v for k, v in model[0].auto_model.state_dict().items() if not k.startswith("pooler.")}
    ours.bert.load_state_dict(state, strict=False)
    return ours.eval(), seconds

"""The LSTM's MiniLM start: one tensor read from the installed checkpoint, rows per WordPiece id or per word
(the mean of its pieces), a deterministic PCA when the width is not 384, and runs built with it."""

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from core.models import SiameseLSTM
from core.models.siamese_lstm import (
    minilm_embedding_table,
    minilm_word_embeddings,
    principal_axes,
)
from core.text.word_tokenizer import WordTokenizer
from core.text.wordpiece_tokenizer import bert_wordpiece, minilm_folder
from core.training.specs import SpecError, spec_from_options

EMBED, HIDDEN, MAX_LEN = 24, 20, 11
TEXTS = ["How do I learn Python?", "Is the Siamese cat unbelievable?", "What is python?", "learn learn Python"]


@pytest.fixture(scope="module")
def minilm() -> np.ndarray:
    return minilm_word_embeddings()


def _run(tokens: str, embedding_dim: int) -> SiameseLSTM:
    spec = spec_from_options(model="lstm", max_length=MAX_LEN, min_freq=1, model_options={
        "tokens": tokens, "init_embeddings": "minilm", "embedding_dim": embedding_dim, "hidden_size": HIDDEN})
    return SiameseLSTM.for_run(spec, TEXTS)


def test_the_one_tensor_read_is_minilms_word_embeddings(minilm):
    assert minilm.shape == (30522, 384) and minilm.dtype == np.float32
    checkpoint = load_file(str(minilm_folder() / "model.safetensors"))
    np.testing.assert_array_equal(minilm, checkpoint["embeddings.word_embeddings.weight"].numpy())


def test_wordpiece_tokens_at_384_start_from_minilms_rows_exactly(minilm):
    model = _run("wordpiece", 384)
    table = model.embedding.weight.detach().numpy()
    assert table.shape == (30522, 384)
    np.testing.assert_array_equal(table[1:], minilm[1:])  # every row but [PAD]
    assert model.config.pad_id == 0 and not table[0].any()  # padding stays zero, as the config promises
    assert model.config.init_embeddings == "minilm" and model.config.tokens == "wordpiece"


def test_word_tokens_start_from_the_mean_of_their_pieces(minilm):
    model = _run("words", 384)
    vocab, table = model.tokenizer.vocab, model.embedding.weight.detach().numpy()
    wordpiece = bert_wordpiece()
    index = {word: i for i, word in enumerate(vocab)}
    [[learn]] = wordpiece.piece_ids(["learn"])  # one piece: its row, exactly
    np.testing.assert_array_equal(table[index["learn"]], minilm[learn])
    [pieces] = wordpiece.piece_ids(["siamese"])  # two pieces: their mean
    assert len(pieces) == 2
    np.testing.assert_allclose(table[index["siamese"]], minilm[pieces].mean(0), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(table[WordTokenizer.unk_id], minilm[wordpiece.unk_id])  # <unk> is [UNK]
    assert not table[WordTokenizer.pad_id].any()


def test_pca_axes_are_orthonormal_ordered_and_deterministic(minilm):
    rows = minilm[:3000]
    mean, axes = principal_axes(rows)
    again_mean, again_axes = principal_axes(rows.copy())
    np.testing.assert_array_equal(axes, again_axes)
    np.testing.assert_array_equal(mean, again_mean)
    assert axes.shape == (384, 384)
    np.testing.assert_allclose(axes @ axes.T, np.eye(384), atol=1e-9)
    assert (axes[np.arange(384), np.abs(axes).argmax(1)] > 0).all()  # the sign rule
    # The projections' variances are the covariance's eigenvalues, largest first.
    coordinates = (rows.astype(np.float64) - mean) @ axes[:7].T  # (3000, 7)
    assert coordinates.shape == (3000, 7)
    eigenvalues = np.linalg.eigvalsh(np.cov(rows.astype(np.float64), rowvar=False))[::-1][:7]
    np.testing.assert_allclose(coordinates.var(0, ddof=1), eigenvalues, rtol=1e-8)


@pytest.mark.slow
def test_a_narrower_table_is_minilms_pca_projection(minilm):
    wordpiece = bert_wordpiece()
    table = minilm_embedding_table(wordpiece, EMBED)
    assert table.shape == (30522, EMBED) and table.dtype == np.float32
    np.testing.assert_array_equal(table, minilm_embedding_table(wordpiece, EMBED))  # deterministic
    mean, axes = principal_axes(minilm)
    np.testing.assert_allclose(table[1:], (minilm[1:].astype(np.float64) - mean) @ axes[:EMBED].T, rtol=1e-5, atol=1e-6)
    assert not table[0].any()
    # Word tokens are projected with the same axes: a one-piece word lands where its piece does.
    word = WordTokenizer(["<pad>", "<unk>", "learn", "python"])
    words = minilm_embedding_table(word, EMBED)
    assert words.shape == (4, EMBED)
    np.testing.assert_array_equal(words[2], table[wordpiece.piece_ids(["learn"])[0][0]])
    np.testing.assert_array_equal(words[1], table[wordpiece.unk_id])


def test_a_narrower_run_trains_from_the_projected_table():
    model = _run("words", EMBED)
    table = model.embedding.weight.detach().numpy()
    np.testing.assert_array_equal(table, minilm_embedding_table(model.tokenizer, EMBED))
    vectors = model.eval().encode(TEXTS)
    assert vectors.shape == (len(TEXTS), HIDDEN)
    torch.testing.assert_close(vectors.norm(dim=-1), torch.ones(len(TEXTS)))


def test_what_a_minilm_start_cannot_give_is_refused():
    with pytest.raises(SpecError, match="at most 384") as raised:
        spec_from_options(model="lstm", model_options={"init_embeddings": "minilm", "embedding_dim": 512})
    assert raised.value.option == "model_options"


def test_a_frozen_table_stays_minilms_while_the_lstm_learns(tmp_path):
    from core.models import load_model
    from core.saving.model_folder import save_model
    from core.text.pair_table import PairTable
    from core.training.objectives import LossConfig
    from core.training.trainer import TrainConfig, Trainer
    from tests.conftest import synthetic_pairs

    spec = spec_from_options(model="lstm", max_length=MAX_LEN, model_options={
        "tokens": "wordpiece", "init_embeddings": "minilm", "embedding_dim": EMBED, "hidden_size": HIDDEN,
        "freeze_embeddings": True})
    model = SiameseLSTM.for_run(spec, TEXTS)
    start = {name: p.detach().clone() for name, p in model.named_parameters()}
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable == ["lstm.weight_ih_l0", "lstm.weight_hh_l0", "lstm.bias_ih_l0", "lstm.bias_hh_l0"]
    pairs = PairTable(synthetic_pairs(40, 0), model.tokenizer)
    config = TrainConfig(epochs=1, batch_size=9, lr=1e-2, device="cpu", patience=0, warmup_ratio=0.0)
    Trainer(model, LossConfig("contrastive"), pairs, config).run()
    torch.testing.assert_close(model.embedding.weight, start["embedding.weight"], rtol=0, atol=0)
    np.testing.assert_array_equal(model.embedding.weight.detach().numpy(),
                                  minilm_embedding_table(model.tokenizer, EMBED))
    assert not torch.allclose(model.lstm.weight_ih_l0, start["lstm.weight_ih_l0"])  # the LSTM did learn
    # A saved frozen model loads frozen, with the same vectors.
    save_model(model, tmp_path / "frozen")
    loaded, _ = load_model(tmp_path / "frozen")
    assert loaded.config.freeze_embeddings and not loaded.embedding.weight.requires_grad
    torch.testing.assert_close(loaded.eval().encode(TEXTS), model.eval().encode(TEXTS))


def test_a_frozen_random_table_is_refused():
    with pytest.raises(SpecError, match="needs init_embeddings minilm") as raised:
        spec_from_options(model="lstm", model_options={"freeze_embeddings": True})
    assert raised.value.option == "model_options"

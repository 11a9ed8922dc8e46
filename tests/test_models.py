"""The three model families: shapes, unit norms, padding invariance, tower sharing, the LSTM's pooling and
tokens, MiniLM vs sentence-transformers."""

import dataclasses

import numpy as np
import pytest
import torch

from core.models import (
    DualEncoder,
    DualEncoderConfig,
    MiniLM,
    SiameseLSTM,
    SiameseLSTMConfig,
)
from core.models.siamese_lstm import WORDPIECE_VOCAB_SIZE, pool
from core.text.word_tokenizer import WordTokenizer

# All different, so a transposed tensor cannot pass unnoticed.
from core.text.wordpiece_tokenizer import bert_wordpiece, minilm_folder
from core.training.specs import spec_from_options

VOCAB, EMBED, HIDDEN, SEQ, BATCH = 99, 24, 32, 7, 13
D_MODEL, HEADS, FF, PROJECTION, MAX_LEN = 36, 4, 44, 20, 11


def _word_tokenizer() -> WordTokenizer:
    return WordTokenizer(["<pad>", "<unk>"] + [f"w{i}" for i in range(VOCAB - 2)], max_length=MAX_LEN)


def _batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(BATCH, SEQ) ids in 2..VOCAB-1 with lengths 1..SEQ, padded with 0, and the matching mask."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, VOCAB, (BATCH, SEQ), generator=g)
    lengths = torch.randint(1, SEQ + 1, (BATCH,), generator=g)
    lengths[0] = SEQ  # the batch is as wide as its longest row
    mask = torch.arange(SEQ)[None, :] < lengths[:, None]
    return ids.masked_fill(~mask, 0), mask


def _lstm(bidirectional: bool = False, num_layers: int = 1, pooling: str = "mean") -> SiameseLSTM:
    torch.manual_seed(0)
    config = SiameseLSTMConfig(vocab_size=VOCAB, embedding_dim=EMBED, hidden_size=HIDDEN,
                               num_layers=num_layers, bidirectional=bidirectional, pooling=pooling)
    return SiameseLSTM(config, _word_tokenizer()).eval()


def _dual(share_towers: bool = False) -> DualEncoder:
    torch.manual_seed(0)
    config = DualEncoderConfig(vocab_size=VOCAB, d_model=D_MODEL, num_heads=HEADS, num_layers=2, ff_dim=FF,
                               max_length=MAX_LEN, projection_dim=PROJECTION, share_towers=share_towers)
    return DualEncoder(config, _word_tokenizer()).eval()


# ---- Siamese LSTM ----------------------------------------------------------------------------
@pytest.mark.parametrize("bidirectional,num_layers,pooling,width", [
    (False, 1, "mean", HIDDEN), (True, 2, "mean", 2 * HIDDEN), (False, 2, "mean", HIDDEN),
    (False, 1, "max", HIDDEN), (True, 1, "max", 2 * HIDDEN),
    (False, 2, "mean+max", 2 * HIDDEN), (True, 1, "mean+max", 4 * HIDDEN)])
def test_lstm_shapes_and_unit_norm(bidirectional, num_layers, pooling, width):
    model = _lstm(bidirectional, num_layers, pooling)
    ids, mask = _batch()
    v = model.embed(ids, mask)
    assert v.shape == (BATCH, width)
    assert model.embedding_dim == width
    torch.testing.assert_close(v.norm(dim=-1), torch.ones(BATCH))
    v1, v2, _ = model((ids, mask), (ids[:5, :4], mask[:5, :4]))
    assert v1.shape == (BATCH, width) and v2.shape == (5, width)


@pytest.mark.parametrize("pooling", ["mean", "max", "mean+max"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_padding_invariance(bidirectional, pooling):
    model = _lstm(bidirectional, num_layers=2, pooling=pooling)
    ids, mask = _batch()
    batched = model.embed(ids, mask)  # (BATCH, d), padded to SEQ
    for row in range(BATCH):
        n = int(mask[row].sum())
        alone = model.embed(ids[row : row + 1, :n], mask[row : row + 1, :n])
        torch.testing.assert_close(batched[row], alone[0], atol=1e-5, rtol=1e-5)


def test_lstm_towers_share_weights():
    model = _lstm(bidirectional=True)
    ids, mask = _batch(seed=3)
    torch.testing.assert_close(model.embed(ids, mask, tower=0), model.embed(ids, mask, tower=1), rtol=0, atol=0)


def test_lstm_padding_embedding_is_zero():
    model = _lstm()
    assert torch.count_nonzero(model.embedding.weight[0]) == 0
    assert model.embedding.weight.shape == (VOCAB, EMBED)


def _states(model: SiameseLSTM, ids, mask) -> torch.Tensor:
    """The unidirectional LSTM's (B, T, H) states, padding included, straight from its layers."""
    return model.lstm(model.embedding(ids))[0]


def test_lstm_mean_pooling_is_todays_masked_mean():
    """The default stays the masked mean of the states, normalised, as before pooling became a setting."""
    model = _lstm(num_layers=2)
    assert SiameseLSTMConfig().pooling == "mean" and model.config.pooling == "mean"
    ids, mask = _batch(seed=1)
    with torch.no_grad():
        h = _states(model, ids, mask)  # (B, T, H)
        m = mask.unsqueeze(-1).float()  # (B, T, 1)
        expected = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1)  # (B, H)
        torch.testing.assert_close(model.embed(ids, mask), expected, rtol=0, atol=0)
    assert [name for name, _ in model.named_parameters()][:2] == ["embedding.weight", "lstm.weight_ih_l0"]


def test_lstm_max_and_mean_max_pool_over_real_tokens_only():
    ids, mask = _batch(seed=2)
    models = {pooling: _lstm(num_layers=1, pooling=pooling) for pooling in ("max", "mean+max")}
    with torch.no_grad():
        h = _states(models["max"], ids, mask)  # (B, T, H), the same weights in both models (seed 0)
        rows = range(BATCH)
        top = torch.stack([h[r, : int(mask[r].sum())].max(0).values for r in rows])  # (B, H)
        mean = torch.stack([h[r, : int(mask[r].sum())].mean(0) for r in rows])  # (B, H)
        norm = torch.nn.functional.normalize
        torch.testing.assert_close(models["max"].embed(ids, mask), norm(top, dim=-1))
        torch.testing.assert_close(models["mean+max"].embed(ids, mask), norm(torch.cat([mean, top], -1), dim=-1))
        # Somewhere in this batch a padded state is larger than every real one: it would have won.
        padded_top = h.max(1).values  # (B, H)
        assert not torch.allclose(padded_top, top)


def test_masked_max_never_picks_padding_by_hand():
    # Two rows, three steps, two features; the padded steps hold the largest values of their column, as the
    # zeros of a packed bidirectional LSTM do when every real state is negative.
    states = torch.tensor([[[-3.0, 2.0], [-1.0, -4.0], [0.0, 0.0]],
                           [[-2.0, -5.0], [9.0, 9.0], [7.0, 8.0]]])  # (2, 3, 2)
    mask = torch.tensor([[True, True, False], [True, False, False]])  # (2, 3)
    torch.testing.assert_close(pool(states, mask, "max"), torch.tensor([[-1.0, 2.0], [-2.0, -5.0]]))
    torch.testing.assert_close(pool(states, mask, "mean"), torch.tensor([[-2.0, -1.0], [-2.0, -5.0]]))
    torch.testing.assert_close(pool(states, mask, "mean+max"),
                               torch.tensor([[-2.0, -1.0, -1.0, 2.0], [-2.0, -5.0, -2.0, -5.0]]))
    # A mask given as 0/1 integers (as an exported graph takes it) means the same; a row without a real
    # token pools to zeros, never to -inf.
    torch.testing.assert_close(pool(states, mask.long(), "max"), torch.tensor([[-1.0, 2.0], [-2.0, -5.0]]))
    empty = torch.zeros(1, 3, dtype=torch.bool)
    assert pool(states[:1], empty, "max").tolist() == [[0.0, 0.0]]


def test_lstm_settings_refuse_unknown_values():
    with pytest.raises(ValueError, match="pooling must be one of mean, max, mean\\+max, got 'avg'"):
        SiameseLSTMConfig(pooling="avg")
    with pytest.raises(ValueError, match="tokens must be one of words, wordpiece"):
        SiameseLSTMConfig(tokens="chars")
    with pytest.raises(ValueError, match="init_embeddings must be one of random, minilm"):
        SiameseLSTMConfig(init_embeddings="glove")
    with pytest.raises(ValueError, match="at most 384"):
        SiameseLSTMConfig(init_embeddings="minilm", embedding_dim=400)


def test_lstm_on_wordpiece_tokens():
    tokenizer = bert_wordpiece(max_length=MAX_LEN)
    assert tokenizer.vocab_size == WORDPIECE_VOCAB_SIZE == 30522
    config = SiameseLSTMConfig(vocab_size=tokenizer.vocab_size, embedding_dim=EMBED, hidden_size=HIDDEN,
                               tokens="wordpiece", pooling="max")
    model = SiameseLSTM(config, tokenizer).eval()
    assert model.embedding.weight.shape == (30522, EMBED)
    assert SiameseLSTM.parameter_count(config) == sum(p.numel() for p in model.parameters())
    vectors = model.encode(["How do I learn Python?", "Zyxwv qwertyuiop?", ""])
    assert vectors.shape == (3, HIDDEN)
    torch.testing.assert_close(vectors.norm(dim=-1), torch.ones(3))
    # A word tokenizer does not fit a wordpiece config, nor the other way round.
    SiameseLSTM.check_tokenizer(config, tokenizer)
    with pytest.raises(ValueError, match="tokens 'wordpiece'"):
        SiameseLSTM.check_tokenizer(config, WordTokenizer(["<pad>", "<unk>"] + [f"w{i}" for i in range(30520)]))
    with pytest.raises(ValueError, match="tokens 'words'"):
        SiameseLSTM.check_tokenizer(dataclasses.replace(config, tokens="words"), tokenizer)


@pytest.mark.parametrize("tokens", ["words", "wordpiece"])
def test_for_run_picks_the_tokenizer(tokens):
    texts = ["how do i learn python", "how do i learn java", "what is python"]
    spec = spec_from_options(model="lstm", max_length=MAX_LEN, min_freq=2,
                             model_options={"tokens": tokens, "embedding_dim": EMBED, "hidden_size": HIDDEN})
    model = SiameseLSTM.for_run(spec, texts)
    if tokens == "words":  # words seen twice, after <pad> and <unk>
        assert model.tokenizer.vocab == ["<pad>", "<unk>", "do", "how", "i", "learn", "python"]
    else:
        assert model.tokenizer.kind == "wordpiece" and model.tokenizer.vocab_size == 30522
        assert model.tokenizer.max_length == MAX_LEN
    assert model.config.vocab_size == model.tokenizer.vocab_size and model.config.tokens == tokens
    assert model.config.pad_id == model.tokenizer.pad_id == 0
    assert model.embedding.weight.shape == (model.tokenizer.vocab_size, EMBED)


# ---- Dual encoder ----------------------------------------------------------------------------
def test_dual_encoder_shapes_and_projection():
    model = _dual()
    ids, mask = _batch()
    v = model.embed(ids, mask, tower=0)
    assert v.shape == (BATCH, PROJECTION)
    assert model.embedding_dim == PROJECTION
    assert model.towers[0].tokens.weight.shape == (VOCAB, D_MODEL)
    assert model.towers[0].positions.weight.shape == (MAX_LEN, D_MODEL)
    assert model.towers[0].projection.weight.shape == (PROJECTION, D_MODEL)
    v1, v2, _ = model((ids, mask), (ids[:5], mask[:5]))
    assert v1.shape == (BATCH, PROJECTION) and v2.shape == (5, PROJECTION)


def test_dual_encoder_towers_are_independent_by_default():
    model = _dual()
    assert len(model.towers) == 2
    ids, mask = _batch()
    a, b = model.embed(ids, mask, tower=0), model.embed(ids, mask, tower=1)
    assert not torch.allclose(a, b, atol=1e-3)
    # each tower has its own parameters
    assert model.towers[0].tokens.weight.data_ptr() != model.towers[1].tokens.weight.data_ptr()


def test_dual_encoder_shared_towers_give_identical_outputs():
    model = _dual(share_towers=True)
    assert len(model.towers) == 1
    ids, mask = _batch()
    torch.testing.assert_close(model.embed(ids, mask, tower=0), model.embed(ids, mask, tower=1), rtol=0, atol=0)
    independent = _dual(share_towers=False)
    n_shared = sum(p.numel() for p in model.parameters())
    assert sum(p.numel() for p in independent.parameters()) == 2 * n_shared


@pytest.mark.parametrize("tower", [0, 1])
def test_dual_encoder_padding_invariance(tower):
    model = _dual()
    ids, mask = _batch(seed=5)
    with torch.no_grad():
        batched = model.embed(ids, mask, tower=tower)
        for row in range(BATCH):
            n = int(mask[row].sum())
            alone = model.embed(ids[row : row + 1, :n], mask[row : row + 1, :n], tower=tower)
            torch.testing.assert_close(batched[row], alone[0], atol=1e-5, rtol=1e-4)


def test_dual_encoder_rejects_heads_not_dividing_d_model():
    with pytest.raises(ValueError, match="divisible"):
        DualEncoderConfig(vocab_size=VOCAB, d_model=30, num_heads=4)


def test_encode_table_keeps_original_order():
    """encode_table sorts by length internally; the rows must come back in input order."""
    model = _lstm(bidirectional=True)
    texts = ["w1", "w2 w3 w4 w5 w6 w7", "w8 w9", "", "w10 w11 w12", "w13 w14 w15 w16", "w17"]
    together = model.encode(texts, batch_size=3)
    assert together.shape == (len(texts), 2 * HIDDEN)
    for row, text in enumerate(texts):
        torch.testing.assert_close(together[row], model.encode([text])[0], atol=1e-5, rtol=1e-5)


def test_encode_table_reports_progress_and_restores_training_mode():
    model = _lstm()
    model.train()
    calls = []
    model.encode([f"w{i}" for i in range(BATCH)], batch_size=5, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(5, BATCH), (10, BATCH), (BATCH, BATCH)]
    assert model.training


def test_score_pairs_is_cosine_of_the_two_towers():
    model = _dual()
    first, second = ["w1 w2", "w3", "w4 w5 w6"], ["w7", "w8 w9", "w4 w5 w6"]
    scores = model.score_pairs(first, second)
    assert scores.shape == (3,) and scores.dtype == np.float64
    v1, v2 = model.encode(first, tower=0), model.encode(second, tower=1)
    expected = (torch.nn.functional.normalize(v1, dim=-1) * torch.nn.functional.normalize(v2, dim=-1)).sum(-1)
    np.testing.assert_allclose(scores, expected.double().numpy(), atol=1e-6)


# ---- MiniLM ------------------------------------------------------------------------------------
SENTENCES = ["How old are you?", "What is your age?", "Where are you from?",
             "What is the best way to learn the history of the Roman empire and why did it fall?"]


@pytest.fixture(scope="module")
def minilm() -> MiniLM:
    return MiniLM.pretrained().eval()


def test_minilm_outputs_384_unit_vectors(minilm):
    v = minilm.encode(SENTENCES)
    assert v.shape == (len(SENTENCES), 384)
    assert minilm.embedding_dim == 384
    torch.testing.assert_close(v.norm(dim=-1), torch.ones(len(SENTENCES)))
    # Siamese: both towers are the same encoder
    torch.testing.assert_close(minilm.encode(SENTENCES[:2], tower=1), v[:2])


def test_minilm_matches_sentence_transformers(minilm):
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(minilm_folder()), device="cpu")
    expected = reference.encode(SENTENCES, convert_to_numpy=True)
    np.testing.assert_allclose(minilm.encode(SENTENCES).numpy(), expected, atol=1e-5)


def test_minilm_ranks_paraphrase_above_hard_negative(minilm):
    scores = minilm.score_pairs(["How old are you?", "How old are you?"], ["What is your age?", "Where are you from?"])
    assert scores[0] > scores[1]
    assert scores[0] > 0.7 and scores[1] < 0.6


def test_minilm_encode_table_order_matches_one_by_one(minilm):
    texts = [SENTENCES[3], SENTENCES[0], "Why?", SENTENCES[2], "Is the sky blue in the evening too?"]
    together = minilm.encode(texts, batch_size=2)
    for row, text in enumerate(texts):
        torch.testing.assert_close(together[row], minilm.encode([text])[0], atol=1e-5, rtol=1e-4)


def test_minilm_tokenizer_is_bert_wordpiece(minilm):
    assert minilm.tokenizer.kind == "wordpiece" and minilm.tokenizer.max_length == 64
    assert minilm.tokenizer.vocab_size == bert_wordpiece().vocab_size == minilm.bert.config.vocab_size

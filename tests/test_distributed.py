"""Two processes on a split global batch give the loss and gradients of one process on all of it.

The same components the Trainer uses under torchrun: ``distributed.local_slice`` picks each rank's
share, ``distributed.wrap`` is DistributedDataParallel, and ``Objective`` all-gathers the vectors
for the in-batch losses. gloo on CPU, 2 processes, tolerance 1e-5.
"""
from __future__ import annotations

import os
import socket

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from core import distributed
from core.models import SiameseLSTM, SiameseLSTMConfig
from core.objectives import LossConfig, Objective
from core.tokenizers import WordTokenizer

WORLD = 2
GLOBAL_BATCH = 12  # 6 pairs per rank
VOCAB, EMB, HIDDEN, SEQ = 99, 24, 32, 7


def _model() -> SiameseLSTM:
    torch.manual_seed(0)
    tokenizer = WordTokenizer(["<pad>", "<unk>"] + [f"w{i}" for i in range(VOCAB - 2)])
    return SiameseLSTM(SiameseLSTMConfig(vocab_size=VOCAB, embedding_dim=EMB, hidden_size=HIDDEN), tokenizer)


def _batch():
    g = torch.Generator().manual_seed(1)
    ids1 = torch.randint(2, VOCAB, (GLOBAL_BATCH, SEQ), generator=g)
    ids2 = torch.randint(2, VOCAB, (GLOBAL_BATCH, SEQ), generator=g)
    mask1 = torch.arange(SEQ)[None] < torch.randint(1, SEQ + 1, (GLOBAL_BATCH,), generator=g)[:, None]
    mask2 = torch.arange(SEQ)[None] < torch.randint(1, SEQ + 1, (GLOBAL_BATCH,), generator=g)[:, None]
    labels = (torch.arange(GLOBAL_BATCH) % 2).float()
    return ids1, mask1, ids2, mask2, labels


def _one_step(module, objective, rows):
    ids1, mask1, ids2, mask2, labels = _batch()
    v1, v2, _ = module((ids1[rows], mask1[rows]), (ids2[rows], mask2[rows]))
    loss = objective(v1, v2, labels[rows])
    loss.backward()
    return loss


LOSSES = ("triplet", "softmax", "contrastive")


def _worker(rank: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(WORLD),
                      LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    context = distributed.current()
    rows = distributed.local_slice(np.arange(GLOBAL_BATCH), context)
    for loss_name in LOSSES:
        model = _model()
        module = distributed.wrap(model, torch.device("cpu"), context)
        loss = _one_step(module, Objective(LossConfig(loss_name)), rows)
        grads = {name: p.grad.numpy() for name, p in model.named_parameters()}
        np.savez(os.path.join(out_dir, f"{loss_name}-rank{rank}.npz"), loss=loss.detach().numpy(), rows=rows, **grads)
    dist.barrier()
    # Leave without tearing down: tearing down DDP's reducer and the gloo group from Python can
    # deadlock (the group's destructor joins a thread that waits for the GIL the main thread holds).
    # The results are on disk; a clean exit code is all the parent needs.
    os._exit(0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def two_rank_results(tmp_path_factory):
    """One 2-process run (spawning is the slow part) that records every loss's step."""
    out = tmp_path_factory.mktemp("ddp")
    mp.spawn(_worker, args=(_free_port(), str(out)), nprocs=WORLD, join=True)
    return out


@pytest.mark.parametrize("loss_name", LOSSES)
def test_two_ranks_match_one_process(loss_name, two_rank_results):
    model = _model()
    single_loss = _one_step(model, Objective(LossConfig(loss_name)), np.arange(GLOBAL_BATCH))
    single_grads = {name: p.grad.numpy() for name, p in model.named_parameters()}

    seen_rows = []
    for rank in range(WORLD):
        result = np.load(two_rank_results / f"{loss_name}-rank{rank}.npz")
        seen_rows.extend(result["rows"].tolist())
        if loss_name != "contrastive":  # in-batch losses: every rank computes the global loss
            np.testing.assert_allclose(result["loss"], single_loss.item(), atol=1e-5)
        for name, grad in single_grads.items():
            assert result[name].shape == grad.shape
            np.testing.assert_allclose(result[name], grad, atol=1e-5, err_msg=f"{loss_name}: {name} (rank {rank})")
    assert sorted(seen_rows) == list(range(GLOBAL_BATCH))  # the ranks split the batch, no overlap


def test_local_slice_is_equal_shares():
    ctx = distributed.DistContext(rank=1, world_size=3)
    assert distributed.local_slice(np.arange(10), ctx).tolist() == [3, 4, 5]  # remainder 9 is dropped
    assert distributed.local_slice(np.arange(4), distributed.SINGLE).tolist() == [0, 1, 2, 3]


def test_gather_is_identity_in_one_process():
    v = torch.randn(13, 32, requires_grad=True)
    assert distributed.gather_batch(v) is v

"""Two processes on a split global batch give the loss and gradients of one process on all of it.

The same components the Trainer uses under torchrun: ``distributed.local_slice`` picks each rank's
share, and ``distributed.wrap(model, device, context, gather_outputs=objective.batch_kind ==
"duplicates")`` is DistributedDataParallel that, for the in-batch losses, all-gathers v1 and v2;
``LossConfig`` only binds the loss (it neither normalises nor gathers). gloo on CPU, 2 processes,
tolerance 1e-5.
"""
from __future__ import annotations

import os
import socket

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from core.models import SiameseLSTM, SiameseLSTMConfig
from core.text.word_tokenizer import WordTokenizer
from core.training import distributed
from core.training.objectives import LossConfig

pytestmark = pytest.mark.ddp

WORLD = 2
GLOBAL_BATCH = 12  # 6 pairs per rank
VOCAB, EMB, HIDDEN, SEQ = 99, 24, 32, 7


def _model() -> SiameseLSTM:
    torch.manual_seed(0)
    tokenizer = WordTokenizer(["<pad>", "<unk>"] + [f"w{i}" for i in range(VOCAB - 2)])
    return SiameseLSTM(SiameseLSTMConfig(vocab_size=VOCAB, embedding_dim=EMB, hidden_size=HIDDEN, dropout=0.0), tokenizer)


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
    return loss, v1.shape[0]


def _wrap(model, context, objective):
    """Exactly the Trainer's call."""
    return distributed.wrap(model, torch.device("cpu"), context, gather_outputs=objective.batch_kind == "duplicates")


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
        objective = LossConfig(loss_name)
        module = _wrap(model, context, objective)
        loss, loss_rows = _one_step(module, objective, rows)
        grads = {name: p.grad.numpy() for name, p in model.named_parameters()}
        # The same step without the gather: the in-batch losses then see only the local negatives.
        ungathered_loss, _ = _one_step(distributed.wrap(_model(), torch.device("cpu"), context), objective, rows)
        np.savez(os.path.join(out_dir, f"{loss_name}-rank{rank}.npz"), loss=loss.detach().numpy(), rows=rows,
                 loss_rows=loss_rows, ungathered_loss=ungathered_loss.detach().numpy(), **grads)
    # Hard negatives are not gathered: vn comes back as this rank made it.
    module = distributed.wrap(_model(), torch.device("cpu"), context, gather_outputs=True)
    ids1, mask1, ids2, mask2, _ = _batch()
    local = torch.as_tensor(rows)
    v1, v2, vn = module((ids1[local], mask1[local]), (ids2[local], mask2[local]), (ids2[:3], mask2[:3]))
    np.savez(os.path.join(out_dir, f"negatives-rank{rank}.npz"), v1=v1.detach().numpy(), v2=v2.detach().numpy(),
             vn=vn.detach().numpy())
    # A cancel on rank 0 alone reaches every rank; no rank asking stops none.
    np.save(os.path.join(out_dir, f"flags-rank{rank}.npy"),
            np.array([distributed.broadcast_flag(rank == 0), distributed.broadcast_flag(False)]))
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
    objective = LossConfig(loss_name)
    module = _wrap(model, distributed.SINGLE, objective)
    assert module is model  # one process: no wrapper at all
    single_loss, _ = _one_step(module, objective, np.arange(GLOBAL_BATCH))
    single_grads = {name: p.grad.numpy() for name, p in model.named_parameters()}

    seen_rows = []
    for rank in range(WORLD):
        result = np.load(two_rank_results / f"{loss_name}-rank{rank}.npz")
        seen_rows.extend(result["rows"].tolist())
        if loss_name != "contrastive":  # in-batch losses: every rank computes the global loss
            assert result["loss_rows"] == GLOBAL_BATCH  # the wrapper handed the loss the gathered batch
            np.testing.assert_allclose(result["loss"], single_loss.item(), atol=1e-5)
            # and the gather is what makes it global: without it the local negatives give another
            # loss (triplet: 0.3174 vs 0.3171 here, well outside the 1e-5 tolerance)
            assert abs(result["ungathered_loss"] - single_loss.item()) > 1e-4
        else:  # labelled pairs are not gathered: each rank's loss reads its own pairs and labels
            assert result["loss_rows"] == GLOBAL_BATCH // WORLD
        for name, grad in single_grads.items():
            assert result[name].shape == grad.shape
            np.testing.assert_allclose(result[name], grad, atol=1e-5, err_msg=f"{loss_name}: {name} (rank {rank})")
    assert sorted(seen_rows) == list(range(GLOBAL_BATCH))  # the ranks split the batch, no overlap


def test_local_slice_is_equal_shares():
    ctx = distributed.DistContext(rank=1, world_size=3)
    assert distributed.local_slice(np.arange(10), ctx).tolist() == [3, 4, 5]  # remainder 9 is dropped
    assert distributed.local_slice(np.arange(4), distributed.SINGLE).tolist() == [0, 1, 2, 3]


def test_gathered_outputs_are_the_global_batch_and_negatives_stay_local(two_rank_results):
    model = _model()
    ids1, mask1, ids2, mask2, _ = _batch()
    with torch.no_grad():
        v1, v2, vn = model((ids1, mask1), (ids2, mask2), (ids2[:3], mask2[:3]))  # the whole batch in one process
    for rank in range(WORLD):
        result = np.load(two_rank_results / f"negatives-rank{rank}.npz")
        assert result["v1"].shape == result["v2"].shape == (GLOBAL_BATCH, model.embedding_dim)
        np.testing.assert_allclose(result["v1"], v1.numpy(), atol=1e-6)  # rank order = row order
        np.testing.assert_allclose(result["v2"], v2.numpy(), atol=1e-6)
        assert result["vn"].shape == (3, model.embedding_dim)  # not gathered: this rank's 3 rows
        np.testing.assert_allclose(result["vn"], vn.numpy(), atol=1e-6)


def test_gather_is_identity_in_one_process():
    v = torch.randn(13, 32, requires_grad=True)
    assert distributed.gather_batch(v) is v


@pytest.mark.parametrize("gather_outputs", [False, True])
def test_wrap_is_the_model_itself_in_one_process(gather_outputs):
    model = _model()
    assert distributed.wrap(model, torch.device("cpu"), distributed.SINGLE, gather_outputs=gather_outputs) is model


def test_a_flag_raised_on_one_rank_is_seen_on_every_rank(two_rank_results):
    for rank in range(WORLD):
        assert np.load(two_rank_results / f"flags-rank{rank}.npy").tolist() == [True, False]


def test_a_cuda_run_joins_a_group_that_reduces_cpu_and_cuda_tensors(monkeypatch):
    """nccl alone refuses the CPU tensor ``broadcast_flag`` reduces: a CUDA run's group has gloo for the CPU."""
    joined = {}
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", lambda index: None)
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda backend: joined.update(backend=backend))
    assert distributed.init_from_env("cuda") == distributed.DistContext(0, 2, 0)
    assert set(joined["backend"].split(",")) == {"cpu:gloo", "cuda:nccl"}
    distributed.init_from_env("cpu")
    assert joined["backend"] == "gloo"


def test_flags_are_reduced_on_a_device_the_group_handles(monkeypatch):
    reduced = []
    monkeypatch.setattr(distributed, "current", lambda: distributed.DistContext(0, 2, 0))
    monkeypatch.setattr(dist, "all_reduce", lambda tensor, op: reduced.append(tensor.device))
    assert distributed.broadcast_flag(True) is True and reduced == [torch.device("cpu")]

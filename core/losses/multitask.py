"""Multi-task loss: contrastive on every labelled pair plus in-batch softmax on the duplicates.

References:
    sentence-transformers' Quora duplicate-questions example (``training_multi-task-learning.py``):
    ``OnlineContrastiveLoss`` on labelled pairs together with ``MultipleNegativesRankingLoss`` on the
    duplicates, which it reports beating either loss alone.
    Hadsell, Chopra & LeCun (2006) and Henderson et al. (2017) for the two terms (see
    ``core.losses.contrastive`` and ``core.losses.softmax``).
"""

import torch

from core.losses.contrastive import contrastive_loss
from core.losses.similarity import reduce
from core.losses.softmax import in_batch_softmax_loss


def multitask_loss(
    v1: torch.Tensor,
    v2: torch.Tensor,
    labels: torch.Tensor,
    margin: float = 1.0,
    form: str = "squared_hinge",
    scale: float = 20.0,
    weight: float = 1.0,
    reduction: str = "mean",
) -> torch.Tensor:
    """Contrastive loss of every pair plus ``weight`` times the in-batch softmax of the duplicates.

    D = the duplicate rows (label 1), n = |D|, N = the non-duplicate rows:

        L_contrastive = contrastive_loss(v1, v2, y, margin, form)                 over all B rows
        L_softmax     = in_batch_softmax_loss(v1[D], [v2[D]; v2[N]], scale)      over the n anchors
        L = L_contrastive + weight * L_softmax

    The non-duplicates' v2 are extra negatives only if no question occurs twice in the batch (the
    "labelled_distinct" batches of ``core.data.batching`` guarantee it); a batch without duplicates has a
    softmax term of 0. "mean" averages each term over its own rows, so ``weight`` means the same whatever the
    share of duplicates; "none" gives contrastive_i + weight * softmax_i, softmax_i = 0 on non-duplicate rows.

    Example:
        >>> v1 = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]])
        >>> v2 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])  # D = 0, 0, 2: no contrastive cost
        >>> labels = torch.tensor([1, 1, 0])  # anchors v1_0, v1_1; candidates v2_0, v2_1 and v2_2
        >>> multitask_loss(v1, v2, labels, scale=1.0, reduction="none")  # log(1 + e^-1 + e^-2), log(1 + 2 e^-1), 0
        tensor([0.4076, 0.5514, 0.0000])
    """
    contrastive = contrastive_loss(v1, v2, labels, margin, form, reduction="none")  # (B,)
    duplicate = labels.to(contrastive.dtype) == 1  # (B,)
    # Positives first, so anchor k's target is column k; then the non-duplicates' v2 as extra negatives.
    candidates = torch.cat([v2[duplicate], v2[~duplicate]])  # (B, d)
    softmax = in_batch_softmax_loss(v1[duplicate], candidates, scale, reduction="none")  # (n,)
    if reduction == "none":
        return contrastive + weight * contrastive.new_zeros(contrastive.shape).masked_scatter(duplicate, softmax)
    # The mean of no anchors is NaN; their sum is the 0 (with a graph) that the term should be.
    softmax_term = reduce(softmax, reduction) if softmax.numel() else softmax.sum()
    return reduce(contrastive, reduction) + weight * softmax_term

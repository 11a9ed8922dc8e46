"""Triplet loss with hard negative mining over in-batch negatives.

Reference: course "Natural Language Processing with Attention Models",
Siamese networks week ("Triplets", "Computing the cost", "Hard negative mining").
"""

import torch
import torch.nn.functional as F

from core.losses.reduction import reduce
from core.losses.similarity import (
    closest_negative,
    diagonal,
    mean_negative,
    similarity_matrix,
)


def triplet_terms(scores: torch.Tensor, margin: float = 0.25) -> tuple[torch.Tensor, torch.Tensor]:
    """The two hinge terms of the full triplet loss, read from a score matrix.

    With s(A, P)_i = s_ii:

        L1_i = max(mean_neg_i    - s(A, P)_i + margin, 0)
        L2_i = max(closest_neg_i - s(A, P)_i + margin, 0)   (0 if row i has no closest negative)

    Takes scores rather than vectors so the explain mode can evaluate an
    edited matrix with exactly the training computation.

    Args:
        scores: (B, B) similarity matrix, rows anchors, diagonal positives, B >= 2.
        margin: alpha, how far every negative must stay below its positive.

    Returns:
        ``(l1, l2)``, each (B,). Gradients reach the diagonal, every
        off-diagonal cell (through L1, weight 1/(B-1)) and the selected
        closest negative (through L2).

    Example:
        >>> scores = torch.tensor([[0.9, -0.8, 0.3], [0.6, 0.5, 0.4], [0.7, 0.8, 0.2]])
        >>> l1, l2 = triplet_terms(scores, margin=0.25)
        >>> l1
        tensor([0.0000, 0.2500, 0.8000])
        >>> l2
        tensor([0.0000, 0.1500, 0.0000])
    """
    positives = diagonal(scores)  # (B,)
    l1 = F.relu(mean_negative(scores) - positives + margin)  # (B,)
    closest, columns = closest_negative(scores)  # (B,), (B,)
    has_closest = columns >= 0  # (B,)
    # Swap the NaN placeholders for finite values before any arithmetic: the
    # outer where already discards those rows, but then no NaN is ever
    # computed, even in the discarded branch, whatever op is put here later.
    safe_closest = torch.where(has_closest, closest, positives.detach())  # (B,)
    l2 = torch.where(has_closest, F.relu(safe_closest - positives + margin), torch.zeros_like(l1))  # (B,)
    return l1, l2


def triplet_loss_from_scores(
    scores: torch.Tensor, margin: float = 0.25, reduction: str = "mean"
) -> torch.Tensor:
    """Full triplet loss L_full = L1 + L2 of a given score matrix.

    Args:
        scores: (B, B) similarity matrix, rows anchors, diagonal positives.
        margin: alpha in the hinge terms (see ``triplet_terms``).
        reduction: "mean" over the batch, "sum" (the course's cost
            J = sum_i L_full_i) or "none" for the (B,) per-row losses.

    Returns:
        A scalar, or (B,) with ``reduction="none"``.

    Example:
        >>> scores = torch.tensor([[0.9, -0.8, 0.3], [0.6, 0.5, 0.4], [0.7, 0.8, 0.2]])
        >>> triplet_loss_from_scores(scores, reduction="none")
        tensor([0.0000, 0.4000, 0.8000])
        >>> triplet_loss_from_scores(scores, reduction="sum")
        tensor(1.2000)
    """
    l1, l2 = triplet_terms(scores, margin)
    return reduce(l1 + l2, reduction)


def triplet_loss(
    v1: torch.Tensor,
    v2: torch.Tensor,
    margin: float = 0.25,
    reduction: str = "mean",
    negatives: torch.Tensor | None = None,
) -> torch.Tensor:
    """Full triplet loss with mean and closest negatives, from two batches of vectors.

    s = similarity_matrix(v1, v2)                       (cosine, (B, B))
    L_full_i = max(mean_neg_i - s_ii + margin, 0) + max(closest_neg_i - s_ii + margin, 0)

    Row i of ``v2`` is the duplicate of row i of ``v1``; every other row of
    ``v2`` serves as a negative, so a batch must not contain two duplicates of
    the same question. The loss takes raw vectors: the cosine normalises them,
    so their lengths do not matter.

    Args:
        v1: (B, d) first questions of the pairs (anchors), any length.
        v2: (B, d) their duplicates (positives).
        margin: alpha in the hinge terms.
        reduction: "mean", "sum" (the course's cost J) or "none" for (B,).
        negatives: optional (K, d) extra negatives for every anchor, e.g. questions labelled
            non-duplicate of a batch question (hard negatives). They become K more columns of
            the score matrix, so they count in the mean negative and can be the closest negative.

    Returns:
        A scalar, or (B,) with ``reduction="none"``.

    Raises:
        ValueError: an unknown ``reduction``, or fewer than 2 candidates.

    Example:
        >>> v1 = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> v2 = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
        >>> triplet_loss(v1, v2, margin=1.0, reduction="none")
        tensor([1.4142, 0.5858])
    """
    candidates = v2 if negatives is None else torch.cat([v2, negatives])  # (B + K, d)
    return triplet_loss_from_scores(similarity_matrix(v1, candidates), margin, reduction)

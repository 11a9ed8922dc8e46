"""Triplet loss with hard negative mining over in-batch negatives.

Reference: course "Natural Language Processing with Attention Models",
Siamese networks week ("Triplets", "Computing the cost", "Hard negative mining").
"""

import torch
import torch.nn.functional as F

from core.losses.similarity import closest_negative, mean_negative, reduce, similarity_matrix


def triplet_terms(scores: torch.Tensor, margin: float = 0.25) -> tuple[torch.Tensor, torch.Tensor]:
    """The two hinge terms of the full triplet loss, read from a score matrix.

    With s(A, P)_i = s_ii:

        L1_i = max(mean_neg_i    - s(A, P)_i + margin, 0)
        L2_i = max(closest_neg_i - s(A, P)_i + margin, 0)   (0 if row i has no closest negative)

    Takes scores (B, B), rows anchors, so the explain mode can evaluate an edited matrix with exactly the training
    computation. Gradients reach the diagonal, every off-diagonal cell (through L1, weight 1/(B-1)) and the selected
    closest negative (through L2).

    Example:
        >>> scores = torch.tensor([[0.9, -0.8, 0.3], [0.6, 0.5, 0.4], [0.7, 0.8, 0.2]])
        >>> l1, l2 = triplet_terms(scores, margin=0.25)
        >>> l1
        tensor([0.0000, 0.2500, 0.8000])
        >>> l2
        tensor([0.0000, 0.1500, 0.0000])
    """
    positives = scores.diagonal()  # (B,)
    l1 = F.relu(mean_negative(scores) - positives + margin)  # (B,)
    closest, columns = closest_negative(scores)  # (B,), (B,)
    has_closest = columns >= 0  # (B,)
    # NaN placeholders swapped for finite values first: no NaN is computed even in the discarded branch
    safe_closest = torch.where(has_closest, closest, positives.detach())  # (B,)
    l2 = torch.where(has_closest, F.relu(safe_closest - positives + margin), torch.zeros_like(l1))  # (B,)
    return l1, l2


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

    "sum" is the course's cost J = sum_i L_full_i. Row i of ``v2`` is the duplicate of row i of ``v1``; every other
    row of ``v2`` is a negative, so a batch must not hold two duplicates of one question. ``negatives``: optional (K, d)
    extra (hard) negatives, K more columns of the score matrix for every anchor.

    Example:
        >>> v1 = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> v2 = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
        >>> triplet_loss(v1, v2, margin=1.0, reduction="none")
        tensor([1.4142, 0.5858])
    """
    candidates = v2 if negatives is None else torch.cat([v2, negatives])  # (B + K, d)
    l1, l2 = triplet_terms(similarity_matrix(v1, candidates), margin)
    return reduce(l1 + l2, reduction)

"""The similarity matrix and its negatives, and the one ``reduce`` every loss applies.

Rows are the anchors (``v1``), columns the candidates (``v2``); the diagonal holds the duplicate pairs and every
off-diagonal cell is an in-batch negative. The triplet loss, the heatmap and the explain mode all read these
quantities from here, so the numbers shown are the numbers trained on.

References: course "Natural Language Processing with Attention Models", Siamese networks week ("Computing the
cost": mean negative, closest negative); the ``reduction`` argument of ``torch.nn.functional`` losses.
"""

import torch
import torch.nn.functional as F

def reduce(per_item: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Reduce (B,) per-pair (or per-row) losses: "mean", "sum", or "none" (the (B,) losses themselves)."""
    if reduction == "mean":
        return per_item.mean()
    return per_item.sum() if reduction == "sum" else per_item


def similarity_matrix(v1: torch.Tensor, v2: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of every row of ``v1`` with every row of ``v2``.

    s_ij = cos(v1_i, v2_j) = <v1_i, v2_j> / (||v1_i|| ||v2_j||);  (B, d), (B', d) -> (B, B')

    Example:
        >>> v1 = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
        >>> v2 = torch.tensor([[3.0, 0.0], [1.0, 1.0], [0.0, -1.0]])
        >>> similarity_matrix(v1, v2)
        tensor([[ 1.0000,  0.7071,  0.0000],
                [ 0.0000,  0.7071, -1.0000]])
    """
    # F.normalize clamps the norm, so a zero vector yields zeros instead of NaN.
    return F.normalize(v1, dim=1) @ F.normalize(v2, dim=1).T  # (B, B')


def pair_similarity(v1: torch.Tensor, v2: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of each pair: row i of ``v1`` with row i of ``v2`` only.

    s_i = cos(v1_i, v2_i), the diagonal of ``similarity_matrix(v1, v2)`` without the B x B work; (B, d) twice -> (B,).
    """
    # Same normalisation as similarity_matrix, so s_i equals its diagonal (zero vectors give 0, not NaN).
    return (F.normalize(v1, dim=1) * F.normalize(v2, dim=1)).sum(dim=1)  # (B,)


def _off_diagonal_mask(scores: torch.Tensor) -> torch.Tensor:
    return ~torch.eye(*scores.shape, dtype=torch.bool, device=scores.device)  # (B, B + K)


def mean_negative(scores: torch.Tensor) -> torch.Tensor:
    """Mean of each row's off-diagonal similarities.

    mean_neg_i = (1 / (C - 1)) * sum_{j != i} s_ij    (C = B columns, or B + K with extra negatives)

    "Negative" names the non-duplicate pairs, not the sign of the values. (B, B) -> (B,), B >= 2.

    Example:
        >>> mean_negative(torch.tensor([[0.9, -0.8, 0.3], [0.1, 0.5, 0.4], [0.0, 0.6, 0.7]]))
        tensor([-0.2500,  0.2500,  0.3000])
    """
    candidates = scores.shape[1]
    # zeroing the diagonal, not subtracting it from the row sum: no cancellation when it dominates
    off_diagonal = scores.masked_fill(~_off_diagonal_mask(scores), 0.0)  # (B, B)
    return off_diagonal.sum(dim=1) / (candidates - 1)  # (B,)


def closest_negative(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Hardest negative that is still easier than the positive, per row.

    closest_neg_i = max { s_ij : j != i, s_ij < s_ii }

    Strict: a value equal to the diagonal is not "less than" it; among equal candidates the lowest column wins.
    Returns ``(values, columns)``, each (B,); gradients flow through ``values`` into the selected cells only. A row
    with no such value gets column -1 and value NaN, so a forgotten mask shows up loudly instead of acting like a
    similarity of 0: select with ``columns >= 0`` through ``torch.where`` (as ``triplet_terms`` does).

    Example:
        >>> values, columns = closest_negative(torch.tensor([[0.9, -0.8, 0.3], [0.6, 0.5, 0.4], [0.7, 0.8, 0.2]]))
        >>> values
        tensor([0.3000, 0.4000,    nan])
        >>> columns
        tensor([ 2,  2, -1])
    """
    with torch.no_grad():
        positives = scores.diagonal().unsqueeze(1)  # (B, 1)
        eligible = (scores < positives) & _off_diagonal_mask(scores)  # (B, B)
        candidates = scores.masked_fill(~eligible, float("-inf"))  # (B, B)
        has_closest = eligible.any(dim=1)  # (B,)
        columns = torch.where(has_closest, candidates.argmax(dim=1), -1)  # (B,)
    # rows without a candidate read column 0, then are overwritten (which also zeroes their gradient)
    gathered = scores.gather(1, columns.clamp(min=0).unsqueeze(1)).squeeze(1)  # (B,)
    values = torch.where(has_closest, gathered, torch.full_like(gathered, float("nan")))  # (B,)
    return values, columns

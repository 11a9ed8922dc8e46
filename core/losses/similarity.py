"""The similarity matrix and its negatives: the one place they are computed.

Rows are the anchors (``v1``), columns the candidates (``v2``); the diagonal holds
the duplicate pairs and every off-diagonal cell is an in-batch negative. The
triplet loss, the heatmap and the explain mode all read these quantities from
here so that the numbers shown are the numbers trained on.

Reference: course "Natural Language Processing with Attention Models",
Siamese networks week ("Computing the cost": mean negative, closest negative).
"""

import torch
import torch.nn.functional as F


def _require_square_batch(scores: torch.Tensor) -> None:
    """(B, B) in-batch scores, or (B, B + K) with K extra negative columns (hard negatives)."""
    if scores.dim() != 2 or scores.shape[1] < scores.shape[0]:
        raise ValueError(f"expected a (B, B) or (B, B+K) score matrix, got shape {tuple(scores.shape)}")
    if scores.shape[1] < 2:
        raise ValueError("a batch needs at least 2 pairs to have any negative")


def similarity_matrix(v1: torch.Tensor, v2: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of every row of ``v1`` with every row of ``v2``.

    s_ij = cos(v1_i, v2_j) = <v1_i, v2_j> / (||v1_i|| ||v2_j||)

    Args:
        v1: (B, d) anchor vectors.
        v2: (B', d) candidate vectors; B' may differ from B.

    Returns:
        (B, B') matrix of cosine similarities.

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

    s_i = cos(v1_i, v2_i), the diagonal of ``similarity_matrix(v1, v2)`` without the B x B work.

    Args:
        v1: (B, d) first vectors of the pairs.
        v2: (B, d) second vectors of the pairs.

    Returns:
        (B,) cosine similarities.

    Raises:
        ValueError: ``v1`` and ``v2`` are not both (B, d) with the same shape.

    Example:
        >>> pair_similarity(torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([[1.0, 1.0], [0.0, -3.0]]))
        tensor([ 0.7071, -1.0000])
    """
    if v1.dim() != 2 or v1.shape != v2.shape:
        raise ValueError(f"expected two (B, d) batches of the same shape, got {tuple(v1.shape)} and {tuple(v2.shape)}")
    # Same normalisation as similarity_matrix, so s_i equals its diagonal (zero vectors give 0, not NaN).
    return (F.normalize(v1, dim=1) * F.normalize(v2, dim=1)).sum(dim=1)  # (B,)


def diagonal(scores: torch.Tensor) -> torch.Tensor:
    """The positive similarities s(A, P) = s_ii of a square score matrix.

    Args:
        scores: (B, B) score matrix.

    Returns:
        (B,) view of the diagonal (gradients flow back into ``scores``).

    Example:
        >>> diagonal(torch.tensor([[0.9, -0.8], [-0.8, 0.5]]))
        tensor([0.9000, 0.5000])
    """
    _require_square_batch(scores)
    return scores.diagonal()  # (B,)


def _off_diagonal_mask(scores: torch.Tensor) -> torch.Tensor:
    return ~torch.eye(*scores.shape, dtype=torch.bool, device=scores.device)  # (B, B + K)


def mean_negative(scores: torch.Tensor) -> torch.Tensor:
    """Mean of each row's off-diagonal similarities.

    mean_neg_i = (1 / (C - 1)) * sum_{j != i} s_ij    (C = B columns, or B + K with extra negatives)

    "Negative" names the non-duplicate pairs, not the sign of the values.

    Args:
        scores: (B, B) score matrix, B >= 2.

    Returns:
        (B,) mean negative per row.

    Example:
        >>> mean_negative(torch.tensor([[0.9, -0.8, 0.3], [0.1, 0.5, 0.4], [0.0, 0.6, 0.7]]))
        tensor([-0.2500,  0.2500,  0.3000])
    """
    _require_square_batch(scores)
    candidates = scores.shape[1]
    # Zeroing the diagonal (rather than subtracting it from the row sum) avoids
    # cancellation error when the diagonal dominates.
    off_diagonal = scores.masked_fill(~_off_diagonal_mask(scores), 0.0)  # (B, B)
    return off_diagonal.sum(dim=1) / (candidates - 1)  # (B,)


def closest_negative(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Hardest negative that is still easier than the positive, per row.

    closest_neg_i = max { s_ij : j != i, s_ij < s_ii }

    The comparison is strict: an off-diagonal value equal to the diagonal is
    not "closest to but less than" it. Among equal candidates the lowest
    column wins.

    Contract for rows with no such value (every off-diagonal >= the diagonal):
    the column is ``-1`` and the value is NaN, so that a forgotten mask shows up
    loudly instead of silently acting like a similarity of 0. Consumers must
    select with ``columns >= 0`` through ``torch.where`` (as ``triplet_terms``
    does); the NaN is a constant, so no gradient ever flows through it.

    Args:
        scores: (B, B) score matrix, B >= 2.

    Returns:
        ``(values, columns)``: (B,) closest negative similarities (NaN where
        none) and (B,) long column indices (-1 where none). Gradients flow
        through ``values`` into the selected cells only.

    Example:
        >>> values, columns = closest_negative(torch.tensor([[0.9, -0.8, 0.3], [0.6, 0.5, 0.4], [0.7, 0.8, 0.2]]))
        >>> values
        tensor([0.3000, 0.4000,    nan])
        >>> columns
        tensor([ 2,  2, -1])
    """
    _require_square_batch(scores)
    # Choosing the column is a discrete decision with no gradient; only the
    # chosen value is differentiated.
    with torch.no_grad():
        positives = scores.diagonal().unsqueeze(1)  # (B, 1)
        eligible = (scores < positives) & _off_diagonal_mask(scores)  # (B, B)
        candidates = scores.masked_fill(~eligible, float("-inf"))  # (B, B)
        has_closest = eligible.any(dim=1)  # (B,)
        columns = torch.where(has_closest, candidates.argmax(dim=1), -1)  # (B,)
    # gather needs a valid index everywhere; rows without a candidate read
    # column 0 and are then overwritten, which also zeroes their gradient.
    gathered = scores.gather(1, columns.clamp(min=0).unsqueeze(1)).squeeze(1)  # (B,)
    values = torch.where(has_closest, gathered, torch.full_like(gathered, float("nan")))  # (B,)
    return values, columns

"""In-batch softmax loss (cross-entropy over the similarity matrix).

References:
    Henderson et al. (2017), "Efficient Natural Language Response Suggestion
    for Smart Reply"; sentence-transformers ``MultipleNegativesRankingLoss``.
    The dual-encoder lesson of the seeds: cross-entropy with targets 0..B-1.
"""

import torch
import torch.nn.functional as F


def in_batch_softmax_loss_from_scores(scores: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """Cross-entropy of each row of a score matrix against its diagonal cell.

    L = -(1/B) * sum_i log( exp(scale * s_ii) / sum_j exp(scale * s_ij) )

    Args:
        scores: (B, B + K) scores, rows queries; column i is row i's positive.
            The K >= 0 extra columns are extra negatives shared by every row.
        scale: multiplies the scores before the softmax (a temperature of 1/scale).

    Returns:
        Scalar mean loss.

    Example:
        >>> in_batch_softmax_loss_from_scores(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))  # log(1 + e^-1)
        tensor(0.3133)
    """
    if scores.dim() != 2 or scores.shape[1] < scores.shape[0]:
        raise ValueError(f"expected (B, B + K) scores with K >= 0, got shape {tuple(scores.shape)}")
    # Row i's positive sits in column i, so the class targets are just 0..B-1.
    targets = torch.arange(scores.shape[0], device=scores.device)  # (B,)
    return F.cross_entropy(scale * scores, targets)


def in_batch_softmax_loss(q: torch.Tensor, a: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """In-batch softmax loss of questions against answers by raw dot product.

    s_ij = <q_i, a_j>;   L = -(1/B) * sum_i log softmax_j(scale * s_ij)[i]

    No normalisation happens here, as in the dual-encoder lesson; pass
    L2-normalised vectors and ``scale=20`` to get sentence-transformers'
    ``MultipleNegativesRankingLoss`` (cosine similarity, scale 20).

    Args:
        q: (B, d) queries.
        a: (B + K, d) answers; row i is the positive of q_i, rows B.. are
            extra (e.g. hard) negatives for every query.
        scale: multiplies the scores before the softmax.

    Returns:
        Scalar mean loss.

    Example:
        >>> q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> in_batch_softmax_loss(q, q)
        tensor(0.3133)
    """
    return in_batch_softmax_loss_from_scores(q @ a.T, scale)  # scores: (B, B + K)

"""In-batch softmax loss (cross-entropy over the cosine similarity matrix).

References:
    Henderson et al. (2017), "Efficient Natural Language Response Suggestion
    for Smart Reply"; sentence-transformers ``MultipleNegativesRankingLoss``.
    The dual-encoder lesson of the seeds: cross-entropy with targets 0..B-1.
"""

import torch
import torch.nn.functional as F

from core.losses.similarity import similarity_matrix


def in_batch_softmax_loss_from_scores(
    scores: torch.Tensor, scale: float = 1.0, reduction: str = "mean"
) -> torch.Tensor:
    """Cross-entropy of each row of a score matrix against its diagonal cell.

    L_i = -log( exp(scale * s_ii) / sum_j exp(scale * s_ij) )

    Takes scores (B, B + K) rather than vectors so the heatmap evaluates a given matrix with exactly the training
    computation; column i is row i's positive, the K extra columns negatives shared by every row.

    Example:
        >>> in_batch_softmax_loss_from_scores(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))  # log(1 + e^-1)
        tensor(0.3133)
        >>> in_batch_softmax_loss_from_scores(torch.tensor([[1.0, 0.0], [1.0, 1.0]]), reduction="none")
        tensor([0.3133, 0.6931])
    """
    targets = torch.arange(scores.shape[0], device=scores.device)  # (B,) row i's positive sits in column i
    return F.cross_entropy(scale * scores, targets, reduction=reduction)


def in_batch_softmax_loss(
    q: torch.Tensor, a: torch.Tensor, scale: float = 20.0, reduction: str = "mean"
) -> torch.Tensor:
    """In-batch softmax loss of questions against answers by cosine similarity.

    s = similarity_matrix(q, a)                      (cosine, (B, B + K))
    L_i = -log softmax_j(scale * s_ij)[i]            (cross-entropy with targets 0..B-1)

    With the default ``scale=20`` this is sentence-transformers' ``MultipleNegativesRankingLoss``; cosines lie in
    -1..1, so a scale near 1 would leave every softmax almost uniform.

    ``a``: (B + K, d), row i the positive of q_i, rows B.. extra (hard) negatives for every query.

    Example:
        >>> q = torch.tensor([[3.0, 0.0], [0.0, 0.5]])
        >>> a = torch.tensor([[1.0, 0.0], [1.0, 1.0]])  # cosines [[1, r], [0, r]], r = 1/sqrt(2)
        >>> in_batch_softmax_loss(q, a, scale=1.0, reduction="none")  # log(1 + e^(r-1)), log(1 + e^-r)
        tensor([0.5574, 0.4008])
    """
    return in_batch_softmax_loss_from_scores(similarity_matrix(q, a), scale, reduction)

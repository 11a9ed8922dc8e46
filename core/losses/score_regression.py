"""Score regression: the cosine of each pair is pulled towards a target score (distillation).

References:
    Reimers & Gurevych (2019), "Sentence-BERT", the regression objective (sentence-transformers'
    ``CosineSimilarityLoss``).
    Thakur et al. (2021), "Augmented SBERT": a cross-encoder teacher labels gold and mined (silver)
    pairs, and the bi-encoder regresses on its scores.
"""

import torch

from core.losses.reduction import reduce
from core.losses.similarity import pair_similarity


def score_regression_loss(
    v1: torch.Tensor,
    v2: torch.Tensor,
    targets: torch.Tensor,
    reduction: str = "mean",
) -> torch.Tensor:
    """Squared error between each pair's cosine and its target score.

    s_i = cos(v1_i, v2_i);   L_i = (s_i - t_i)^2

    With a teacher's duplicate probability as t_i in [0, 1], the student's cosine learns the
    teacher's ranking and its confidence: a pair the teacher is unsure of (t = 0.5) is not pushed
    to either end, which hard 0/1 labels would do. Non-duplicates are pulled towards cosine 0
    (orthogonal), not -1.

    Args:
        v1: (B, d) first questions of the pairs, any length (the cosine normalises them).
        v2: (B, d) second questions of the pairs.
        targets: (B,) t, the score each pair's cosine should reach; any float dtype.
        reduction: "mean" | "sum" | "none".

    Returns:
        A scalar, or (B,) with ``reduction="none"``.

    Example:
        >>> v1 = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
        >>> v2 = torch.tensor([[2.0, 0.0], [0.0, 3.0]])   # cosines 1 and 0
        >>> score_regression_loss(v1, v2, torch.tensor([0.8, 0.5]), reduction="none")
        tensor([0.0400, 0.2500])
    """
    scores = pair_similarity(v1, v2)  # (B,)
    if targets.shape != scores.shape:
        raise ValueError(f"targets shape {tuple(targets.shape)} != pair count {tuple(scores.shape)}")
    return reduce((scores - targets.to(scores.dtype)).square(), reduction)

"""CoSENT loss: rank the cosines of labelled pairs against each other, across the batch.

References:
    Su Jianlin (2022), "CoSENT: a more efficient sentence vector scheme than Sentence-BERT"
    (kexue.fm/archives/8847); sentence-transformers ``CoSENTLoss``.
    Li & Li (2023), "AnglE-optimized Text Embeddings": the same term is AnglE's ranking loss.
"""

import torch

from core.losses.similarity import pair_similarity


def cosent_loss(
    v1: torch.Tensor,
    v2: torch.Tensor,
    labels: torch.Tensor,
    scale: float = 20.0,
) -> torch.Tensor:
    """CoSENT loss of a batch of labelled pairs.

    s_i = cos(v1_i, v2_i)                                          (row-wise: pair i with itself)
    L = log(1 + sum_{(i, j): y_i > y_j} exp(scale * (s_j - s_i)))

    Every pair labelled higher must score a higher cosine than every pair labelled lower (graded labels work too:
    only their order is read), so non-duplicates are not pushed to any particular angle. One log-sum-exp over the
    batch, with no per-pair terms: it takes no ``reduction``. ``scale`` is lambda (20, as in CoSENT and AnglE).

    Example:
        >>> v1 = torch.tensor([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]])
        >>> v2 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # s = 1, 0, 1/sqrt(2)
        >>> cosent_loss(v1, v2, torch.tensor([1, 0, 0]), scale=1.0)  # log(1 + e^(0 - 1) + e^(0.7071 - 1))
        tensor(0.7486)
        >>> cosent_loss(v1, v2, torch.tensor([1, 1, 1]))  # nothing to rank
        tensor(0.)
    """
    similarities = pair_similarity(v1, v2)  # (B,)
    y = labels.to(similarities.dtype)  # (B,); bool and int labels compare as 0/1
    differences = scale * (similarities.unsqueeze(0) - similarities.unsqueeze(1))  # (B, B): [i, j] = λ(s_j − s_i)
    ranked = y.unsqueeze(1) > y.unsqueeze(0)  # (B, B): pair i should score above pair j
    # -inf takes the unranked cells out of the sum (exp(-inf) = 0, and their gradient is 0);
    # the leading 0 is the "1 +" and keeps the log-sum-exp finite when no cell is ranked.
    exponents = differences.masked_fill(~ranked, float("-inf")).flatten()  # (B*B,)
    return torch.logsumexp(torch.cat([exponents.new_zeros(1), exponents]), dim=0)

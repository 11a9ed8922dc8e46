"""Contrastive loss on labelled pairs (Euclidean distance of unit vectors, margin hinge).

References:
    Hadsell, Chopra & LeCun (2006), "Dimensionality Reduction by Learning an
    Invariant Mapping", CVPR: the "squared_hinge" form.
    The seed blog on Siamese networks: the "margin_squared" form, which
    hinges the squared distance on m^2 instead.
"""

import torch
import torch.nn.functional as F

from core.losses.similarity import reduce

# The two forms, declared once: the CLI's choices and LossConfig's check read these.
CONTRASTIVE_FORMS = ("squared_hinge", "margin_squared")


def contrastive_loss(
    v1: torch.Tensor,
    v2: torch.Tensor,
    labels: torch.Tensor,
    margin: float = 1.0,
    form: str = "squared_hinge",
    reduction: str = "mean",
) -> torch.Tensor:
    """Contrastive loss of labelled pairs, on the distance between their unit vectors.

    u = v / ||v||_2;   D_i = ||u1_i - u2_i||_2 in [0, 2]   (row-wise: pair i only, no in-batch negatives)

        squared_hinge:  L_i = Y_i D_i^2 + (1 - Y_i) max(m - D_i, 0)^2
        margin_squared: L_i = Y_i D_i^2 + (1 - Y_i) max(m^2 - D_i^2, 0)

    Normalising first makes a fixed margin mean the same whatever the vectors' lengths: D^2 = 2 - 2 cos(v1_i, v2_i),
    and m = 1 asks non-duplicates to be at least 60 degrees apart.

    Example:
        >>> v1 = torch.tensor([[2.0, 0.0], [1.0, 0.0], [3.0, 0.0]])
        >>> v2 = torch.tensor([[5.0, 0.0], [0.0, 4.0], [-1.0, 0.0]])  # D = 0, sqrt(2), 2
        >>> contrastive_loss(v1, v2, torch.tensor([1, 1, 0]), reduction="none")
        tensor([0., 2., 0.])
    """
    u1, u2 = F.normalize(v1, dim=1), F.normalize(v2, dim=1)  # (B, d) each
    # D^2 as a plain sum of squares is exact (0 for identical vectors, where 2 - 2 cos would
    # cancel) and has gradient 2(u1 - u2), which is 0, not NaN, for identical vectors; D itself
    # goes through a clamped sqrt because d sqrt(x)/dx is infinite at 0.
    squared_distances = (u1 - u2).square().sum(dim=1)  # (B,)
    if form == "squared_hinge":
        push_apart = F.relu(margin - squared_distances.clamp(min=1e-12).sqrt()).square()  # (B,)
    else:
        push_apart = F.relu(margin**2 - squared_distances)  # (B,)
    is_duplicate = labels.to(squared_distances.dtype)  # (B,)
    return reduce(is_duplicate * squared_distances + (1.0 - is_duplicate) * push_apart, reduction)

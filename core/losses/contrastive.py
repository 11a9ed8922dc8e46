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

# The two forms, declared once: the CLI's choices, LossConfig's check and contrastive_terms read these.
CONTRASTIVE_FORMS = ("squared_hinge", "margin_squared")


def contrastive_terms(
    distances: torch.Tensor,
    labels: torch.Tensor,
    margin: float = 1.0,
    form: str = "squared_hinge",
    *,
    squared_distances: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-pair contrastive loss from pair distances.

        squared_hinge:  Y * D^2 + (1 - Y) * max(m - D, 0)^2
        margin_squared: Y * D^2 + (1 - Y) * max(m^2 - D^2, 0)

    (B,) distances D and labels Y -> (B,) losses; ``squared_distances``: D^2 when the caller has it exactly.

    Example:
        >>> contrastive_terms(torch.tensor([0.0, 0.5, 2.0]), torch.tensor([1, 0, 0]))
        tensor([0.0000, 0.2500, 0.0000])
        >>> contrastive_terms(torch.tensor([0.0, 0.5, 2.0]), torch.tensor([1, 0, 0]), form="margin_squared")
        tensor([0.0000, 0.7500, 0.0000])
    """
    if form not in CONTRASTIVE_FORMS:
        raise ValueError(f"form must be one of {CONTRASTIVE_FORMS}, got {form!r}")
    if labels.shape != distances.shape:
        raise ValueError(f"labels shape {tuple(labels.shape)} != distances shape {tuple(distances.shape)}")
    if squared_distances is None:
        squared_distances = distances.square()  # (B,)
    is_duplicate = labels.to(distances.dtype)  # (B,)
    if form == "squared_hinge":
        push_apart = F.relu(margin - distances).square()  # (B,)
    else:
        push_apart = F.relu(margin**2 - squared_distances)  # (B,)
    return is_duplicate * squared_distances + (1.0 - is_duplicate) * push_apart  # (B,)


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

    The loss takes raw vectors and L2-normalises them itself, so that a fixed margin means the same
    thing whatever the vectors' lengths: D^2 = 2 - 2 cos(v1_i, v2_i), and m = 1 asks non-duplicates
    to be at least 60 degrees apart.

    Example:
        >>> v1 = torch.tensor([[2.0, 0.0], [1.0, 0.0], [3.0, 0.0]])
        >>> v2 = torch.tensor([[5.0, 0.0], [0.0, 4.0], [-1.0, 0.0]])  # D = 0, sqrt(2), 2
        >>> contrastive_loss(v1, v2, torch.tensor([1, 1, 0]), reduction="none")
        tensor([0., 2., 0.])
        >>> contrastive_loss(v1, v2, torch.tensor([1, 0, 0]), margin=1.5, form="margin_squared")
        tensor(0.0833)

        (The second is (0 + max(2.25 - 2, 0) + max(2.25 - 4, 0)) / 3 = 0.25 / 3.)
    """
    u1, u2 = F.normalize(v1, dim=1), F.normalize(v2, dim=1)  # (B, d) each
    # D^2 as a plain sum of squares is exact (0 for identical vectors, where 2 - 2 cos would
    # cancel) and has gradient 2(u1 - u2), which is 0, not NaN, for identical vectors; D itself
    # goes through a clamped sqrt because d sqrt(x)/dx is infinite at 0.
    squared_distances = (u1 - u2).square().sum(dim=1)  # (B,)
    distances = squared_distances.clamp(min=1e-12).sqrt()  # (B,)
    terms = contrastive_terms(distances, labels, margin, form, squared_distances=squared_distances)  # (B,)
    return reduce(terms, reduction)

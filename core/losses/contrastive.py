"""Contrastive loss on labelled pairs (Euclidean distance, margin hinge).

References:
    Hadsell, Chopra & LeCun (2006), "Dimensionality Reduction by Learning an
    Invariant Mapping", CVPR: the "squared_hinge" form.
    The seed blog on Siamese networks: the "margin_squared" form, which
    hinges the squared distance on m^2 instead.
"""

import torch
import torch.nn.functional as F

_FORMS = ("squared_hinge", "margin_squared")


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

    Args:
        distances: (B,) Euclidean distances D between the two members of each pair.
        labels: (B,) Y, 1 (or True) for duplicates and 0 for non-duplicates; any dtype.
        margin: m, the distance beyond which non-duplicates cost nothing.
        form: "squared_hinge" or "margin_squared".
        squared_distances: (B,) D^2 when the caller has it exactly; otherwise
            ``distances ** 2`` is used.

    Returns:
        (B,) loss per pair.

    Example:
        >>> contrastive_terms(torch.tensor([0.0, 0.5, 2.0]), torch.tensor([1, 0, 0]))
        tensor([0.0000, 0.2500, 0.0000])
        >>> contrastive_terms(torch.tensor([0.0, 0.5, 2.0]), torch.tensor([1, 0, 0]), form="margin_squared")
        tensor([0.0000, 0.7500, 0.0000])
    """
    if form not in _FORMS:
        raise ValueError(f"form must be one of {_FORMS}, got {form!r}")
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
) -> torch.Tensor:
    """Contrastive loss of labelled pairs, averaged over the batch.

    D_i = ||v1_i - v2_i||_2   (row-wise: pair i only, no in-batch negatives)

        squared_hinge:  L = mean_i [ Y_i D_i^2 + (1 - Y_i) max(m - D_i, 0)^2 ]
        margin_squared: L = mean_i [ Y_i D_i^2 + (1 - Y_i) max(m^2 - D_i^2, 0) ]

    Args:
        v1: (B, d) first questions of the pairs.
        v2: (B, d) second questions of the pairs.
        labels: (B,) Y, 1 (or True) if the pair is a duplicate; float, int or bool.
        margin: m.
        form: "squared_hinge" (Hadsell et al. 2006) or "margin_squared" (seed blog).

    Returns:
        Scalar mean loss.

    Example:
        >>> v1 = torch.zeros(3, 2)
        >>> v2 = torch.tensor([[0.0, 0.0], [0.3, 0.4], [2.0, 0.0]])
        >>> contrastive_loss(v1, v2, torch.tensor([1, 0, 0]), form="margin_squared")
        tensor(0.2500)
    """
    # D^2 as a plain sum of squares is exact and has gradient 2(v1 - v2), which
    # is 0, not NaN, for identical vectors; D itself goes through a clamped
    # sqrt because d sqrt(x)/dx is infinite at 0.
    squared_distances = (v1 - v2).square().sum(dim=1)  # (B,)
    distances = squared_distances.clamp(min=1e-12).sqrt()  # (B,)
    terms = contrastive_terms(distances, labels, margin, form, squared_distances=squared_distances)
    return terms.mean()

"""The ``reduction`` argument every loss takes: one check and one reduce for all of them.

Reference: the ``reduction`` argument of ``torch.nn.functional`` losses ("mean" | "sum" | "none").
"""

import torch

REDUCTIONS = ("mean", "sum", "none")


def reduce(per_item: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Reduce (B,) per-pair (or per-row) losses as ``reduction`` says, after checking it.

        mean: (1/B) * sum_i L_i     sum: sum_i L_i     none: the (B,) L_i themselves

    Args:
        per_item: (B,) loss of each pair or row.
        reduction: "mean", "sum" or "none".

    Returns:
        A scalar, or ``per_item`` itself with ``reduction="none"``.

    Raises:
        ValueError: ``reduction`` is not one of ``REDUCTIONS``.

    Example:
        >>> losses = torch.tensor([0.5, 1.0, 3.0])
        >>> reduce(losses), reduce(losses, "sum"), reduce(losses, "none")
        (tensor(1.5000), tensor(4.5000), tensor([0.5000, 1.0000, 3.0000]))
        >>> reduce(losses, "max")
        Traceback (most recent call last):
        ...
        ValueError: reduction must be one of ('mean', 'sum', 'none'), got 'max'
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    if reduction == "mean":
        return per_item.mean()
    if reduction == "sum":
        return per_item.sum()
    return per_item

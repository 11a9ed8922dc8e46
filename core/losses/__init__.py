"""Loss functions for Siamese question encoders: pure tensor functions with their formulas.

Every loss takes raw vectors, owns its similarity and normalisation, and takes ``reduction="mean" | "sum" | "none"``
(``core.losses.similarity.reduce``; CoSENT, one log-sum-exp over the batch, none). Gathering vectors across
processes is not a loss's business. ``core.losses.registry`` describes each training loss once.
"""

import importlib

# Loaded on first use (PEP 562): importing core.losses or its registry does not import torch.
_HOMES = {
    "similarity_matrix": "core.losses.similarity",
    "mean_negative": "core.losses.similarity",
    "closest_negative": "core.losses.similarity",
    "triplet_loss": "core.losses.triplet",
    "contrastive_loss": "core.losses.contrastive",
    "CONTRASTIVE_FORMS": "core.losses.contrastive",
    "in_batch_softmax_loss": "core.losses.softmax",
    "cosent_loss": "core.losses.cosent",
    "multitask_loss": "core.losses.multitask",
}

__all__ = list(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value

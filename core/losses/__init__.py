"""Loss functions for Siamese question encoders: pure tensor functions, one per file.

One convention for every loss: it takes raw vectors and owns its similarity and normalisation
(cosine through ``similarity_matrix`` for triplet and softmax, ``pair_similarity`` for CoSENT, the
distance of unit vectors for contrastive), and takes ``reduction="mean" | "sum" | "none"`` (checked
and applied by ``core.losses.reduction.reduce``; CoSENT, one log-sum-exp over the whole batch, takes
only "mean"). ``multitask_loss`` adds two of them rather than computing anything itself. Gathering
vectors across processes is not a loss's business (see ``core.training.distributed.wrap``).
``core.losses.registry`` describes each training loss once, for the objective, the menu and the card.
"""

import importlib

# Where each public name lives. Loaded on first use (PEP 562), so that importing core.losses, or its
# torch-free registry, does not import torch: the Home page lists the losses without it.
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
    "score_regression_loss": "core.losses.score_regression",
}

__all__ = list(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted({*globals(), *__all__})

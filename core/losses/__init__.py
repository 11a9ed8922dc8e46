"""Loss functions for Siamese question encoders: pure tensor functions, one per file.

One convention for every loss: it takes raw vectors and owns its similarity and normalisation
(cosine through ``similarity_matrix`` for triplet and softmax, ``pair_similarity`` for CoSENT, the
distance of unit vectors for contrastive), and takes ``reduction="mean" | "sum" | "none"`` (checked
and applied by ``core.losses.reduction.reduce``; CoSENT, one log-sum-exp over the whole batch, takes
only "mean"). ``multitask_loss`` adds two of them rather than computing anything itself. Gathering
vectors across processes is not a loss's business (see ``core.training.distributed.wrap``).
"""

from core.losses.contrastive import CONTRASTIVE_FORMS, contrastive_loss
from core.losses.cosent import cosent_loss
from core.losses.multitask import multitask_loss
from core.losses.score_regression import score_regression_loss
from core.losses.similarity import closest_negative, mean_negative, similarity_matrix
from core.losses.softmax import in_batch_softmax_loss
from core.losses.triplet import triplet_loss

__all__ = [
    "similarity_matrix",
    "mean_negative",
    "closest_negative",
    "triplet_loss",
    "contrastive_loss",
    "CONTRASTIVE_FORMS",
    "in_batch_softmax_loss",
    "cosent_loss",
    "multitask_loss",
    "score_regression_loss",
]

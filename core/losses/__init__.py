"""Loss functions for Siamese question encoders: pure tensor functions, one per file."""

from core.losses.contrastive import contrastive_loss
from core.losses.similarity import closest_negative, mean_negative, similarity_matrix
from core.losses.softmax import in_batch_softmax_loss
from core.losses.triplet import triplet_loss

__all__ = [
    "similarity_matrix",
    "mean_negative",
    "closest_negative",
    "triplet_loss",
    "contrastive_loss",
    "in_batch_softmax_loss",
]

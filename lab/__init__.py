"""App support for the Streamlit pages: page setup, caches and plotly figures.

Two modules import streamlit: ``lab.session`` (the shared page setup: session state, the active
dataset, the model and training-queue caches every session shares) and ``lab.cached`` (Streamlit
caches of scores, validation pairs and search indexes for the analysis pages). ``lab.charts`` and
``lab.figures`` build plotly figures from numbers and import no streamlit. None of them holds maths:
scores, metrics and indexes come from ``core``.
"""

import os

# The app trains on background threads while other sessions encode questions in the same process.
# OpenMP's default active spin-waiting lets a training run starve everyone else on a small
# machine (torch was several times slower under load with it); passive waiting shares the cores. It must be
# set before torch is first imported, which lab does before any page touches a model.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

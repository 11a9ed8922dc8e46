"""The Streamlit app's own code: page list, page setup, workspace, one view per page, figures (``lab.figures``
imports no streamlit); scores, metrics and indexes come from ``core``."""

import os

# The app trains on background threads while other sessions encode questions in the same process. OpenMP's
# active spin-waiting lets a training run starve everyone else on a small machine; passive waiting shares the
# cores. It must be set before torch is first imported, which lab does before any page touches a model.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

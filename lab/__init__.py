"""App support: the shared page setup (``lab.session``) and plotly figures (``lab.charts``).

Only ``lab.session`` imports streamlit; ``lab.charts`` builds figures from numbers that ``core``
computed. Neither holds maths.
"""

import os

# The app trains on background threads while other sessions encode questions in the same process.
# OpenMP's default active spin-waiting lets a training run starve everyone else on a small
# machine (torch was 4-10x slower under load with it); passive waiting shares the cores. It must be
# set before torch is first imported, which lab does before any page touches a model.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

"""App support: the shared page setup (``lab.session``) and plotly figures (``lab.charts``).

Only ``lab.session`` imports streamlit; ``lab.charts`` builds figures from numbers that ``core``
computed. Neither holds maths.
"""

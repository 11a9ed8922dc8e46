"""One active model for every analysis page: zero-shot MiniLM or this session's newest finished run until the
user picks another, and each page's choices survive a visit to another page."""
from core.models import ZERO_SHOT
from core.saving import list_runs
from lab.navigation import SEARCH, SIMILARITY


def test_zero_shot_is_the_active_model_when_nothing_is_trained(runs_root, open_page):
    at = open_page(SIMILARITY.path)
    assert at.selectbox(key="active_model").value == ZERO_SHOT


def test_saved_runs_are_choices_and_a_choice_follows_the_user(runs_with_models, open_page):
    root, _ = runs_with_models
    runs, _ = list_runs(root)
    older = runs[1]["path"]
    at = open_page(SIMILARITY.path)
    assert not at.exception
    # Nothing trained in this session: zero-shot MiniLM, every saved run a choice (tests/test_app_user_state.py).
    assert at.selectbox(key="active_model").value == ZERO_SHOT
    assert len(at.selectbox(key="active_model").options) == 1 + len(runs)
    at.selectbox(key="active_model").set_value(older).run()
    at.slider(key="sim_margin").set_value(0.5).run()
    at.switch_page(SEARCH.path).run()
    assert not at.exception
    assert at.selectbox(key="active_model").value == older  # the same choice on another page
    at.slider(key="k").set_value(7).run()
    at.switch_page(SIMILARITY.path).run()
    assert at.selectbox(key="active_model").value == older and at.slider(key="sim_margin").value == 0.5
    at.switch_page(SEARCH.path).run()
    assert at.slider(key="k").value == 7

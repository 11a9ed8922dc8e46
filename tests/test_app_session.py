"""One active model for every analysis page: the newest finished run until the user picks another, and
each page's choices survive a visit to another page."""
import json

from core.inference.run_quality import judge_run
from core.models import ZERO_SHOT
from core.saving import list_runs
from lab.navigation import SEARCH, SIMILARITY


def test_zero_shot_is_the_active_model_when_nothing_is_trained(runs_root, open_page):
    at = open_page(SIMILARITY.path)
    assert at.selectbox(key="active_model").value == ZERO_SHOT


def test_the_newest_finished_run_is_active_and_a_choice_follows_the_user(runs_with_models, open_page):
    root, folders = runs_with_models
    runs, _ = list_runs(root)
    newest, older = runs[0]["path"], runs[1]["path"]
    at = open_page(SEARCH.path)
    assert not at.exception
    assert at.selectbox(key="active_model").value == newest
    at.selectbox(key="active_model").set_value(older).run()
    at.slider(key="k").set_value(7).run()
    at.switch_page(SIMILARITY.path).run()
    assert not at.exception
    assert at.selectbox(key="active_model").value == older  # the same choice on another page
    at.slider(key="sim_margin").set_value(0.5).run()
    at.switch_page(SEARCH.path).run()
    assert at.selectbox(key="active_model").value == older and at.slider(key="k").value == 7
    at.switch_page(SIMILARITY.path).run()
    assert at.slider(key="sim_margin").value == 0.5


def test_a_cancelled_run_is_not_the_default(runs_with_models, open_page):
    root, _ = runs_with_models
    runs, _ = list_runs(root)
    config_path = root / runs[0]["name"] / "config.json"
    config = json.loads(config_path.read_text())
    config["training"]["status"] = "cancelled"
    config_path.write_text(json.dumps(config))
    at = open_page(SIMILARITY.path)
    # The next finished run, unless it is worse than chance or TF-IDF: then none is, and zero-shot MiniLM stays.
    useful = not judge_run(runs[1]["metrics"]).flagged
    assert at.selectbox(key="active_model").value == (runs[1]["path"] if useful else ZERO_SHOT)

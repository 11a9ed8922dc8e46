"""The app says plainly when a run is worse than chance and when a file is too small to train on (AppTest):
the Train page warns instead of the green box, such a run never becomes the default model, and the Data
page warns at load time."""
import pytest
from conftest import inverted_pairs

from core.data import load_pairs
from core.models import ZERO_SHOT
from core.status import DONE
from lab.navigation import DATA, SIMILARITY, TRAIN
from lab.session import job_queue


@pytest.fixture
def inverted_dataset():
    """(pairs, report) of a file whose labels run against its texts: a barely trained model scores ROC AUC 0."""
    return load_pairs(inverted_pairs().to_csv(index=False).encode())


@pytest.mark.slow
def test_a_run_worse_than_chance_warns_and_never_becomes_the_default(runs_root, open_page, rerun_until,
                                                                      inverted_dataset):
    pairs, report = inverted_dataset
    at = open_page(TRAIN.path, pairs=pairs, data_report=report, data_name="inverted.csv (upload)",
                   preset="custom")  # a tiny LSTM, not the auto recipe an upload opens on
    for key, value in {"epochs": 1, "max_steps": 1, "lr": 1e-6, "lstm.embedding_dim": 12, "lstm.hidden_size": 10,
                       "max_length": 16}.items():
        at.number_input(key=key).set_value(value)
    at.button(key="start").click().run()
    assert not at.exception, at.exception
    rerun_until(at, lambda at: job_queue().jobs[at.session_state.jobs[-1]].finished)
    job = job_queue().jobs[at.session_state.jobs[-1]]
    assert job.status == DONE, job.error
    assert job.result.judged().worse_than_chance

    at.run()
    assert not at.success  # no green box for a model worse than a coin flip
    [warning] = [w.value for w in at.warning if w.value.startswith("Finished")]
    assert warning.startswith(f"Finished ({job.result.outcome.message}), but not a useful model: saved as "
                              f"**{job.result.folder.name}**")
    assert job.result.judged().message in warning and "Worse than chance: validation ROC AUC 0.000" in warning
    assert "the auto preset" in warning and "sample-demo" not in warning  # advice for an upload, not the sample's

    at.switch_page(SIMILARITY.path).run()
    assert not at.exception, at.exception
    picker = at.selectbox(key="active_model")
    assert picker.value == ZERO_SHOT  # the newest finished run is useless: zero-shot MiniLM stays
    assert f"{job.result.folder.name} (val AUC 0.000, worse than chance)" in picker.options  # still a choice
    picker.set_value(str(job.result.folder)).run()
    assert at.selectbox(key="active_model").value == str(job.result.folder)  # picked explicitly, it is used


def upload(at, name: str, data: bytes):
    at.file_uploader(key="upload").set_value((name, data, "text/csv")).run()
    assert not at.exception, at.exception
    return at


def test_the_data_page_warns_about_a_one_row_file(runs_root, open_page):
    at = upload(open_page(DATA.path), "one.csv", b"question1,question2,is_duplicate\nHow old are you?,What is your age?,1\n")
    assert at.session_state.data_name == "one.csv (upload)"
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 3 and all(w.startswith("Not enough to train on: ") for w in warnings)
    assert "need at least 2 duplicate pairs" in warnings[0]
    assert "the one pair is a duplicate" in warnings[1]
    assert "use at least 15 pairs" in warnings[2]


def test_the_data_page_warns_about_a_one_class_file(runs_root, open_page):
    pairs = inverted_pairs(40)
    data = pairs[pairs["is_duplicate"] == 0].to_csv(index=False).encode()
    at = upload(open_page(DATA.path), "others.csv", data)
    warnings = [w.value for w in at.warning]
    assert warnings[0].startswith("Not enough to train on: only 0 duplicate pair(s)")
    assert warnings[1].startswith("Not enough to train on: all 20 pairs are non-duplicates") and "add at least 1 duplicate pair" in warnings[1]
    assert len(warnings) == 2  # 20 pairs hold a validation split of 2

"""The Train page on a user's own data (AppTest): the auto recipe read off the upload, and the Data page's
validation and test files handed to the run."""
from core.training.auto_recipe import auto_options
from lab.navigation import TRAIN
from lab.session import job_queue


def test_an_upload_starts_from_the_auto_recipe_and_trains_with_its_validation_and_test_files(runs_root, open_page,
                                                                                           sample_pairs):
    pairs, report = sample_pairs
    train, val, test = pairs.iloc[100:], pairs.iloc[:60], pairs.iloc[60:100]
    at = open_page(TRAIN.path, pairs=train, data_report=report, data_name="forum.csv (upload)",
                   held_out_files={"val": (val, "dev.csv"), "test": (test, "test.csv")})
    assert not at.exception, at.exception
    at.selectbox(key="preset").set_value("auto").run()
    recipe = auto_options(train, "cpu", has_val_file=True).options
    shown = {widget.key: widget.value for widget in at.number_input}
    assert (shown["epochs"], shown["batch_size"], shown["max_length"]) == (
        recipe["epochs"], recipe["batch_size"], recipe["max_length"])
    assert at.selectbox(key="model").value == "minilm"

    at.button(key="start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    job = job_queue().jobs[at.session_state.jobs[-1]]
    job.cancel()  # only what the run was handed matters here
    job_queue().wait(job, timeout=120)
    assert job.val is val and job.test is test
    spec = job.spec
    assert (spec.model, spec.val_data_name, spec.test_data_name) == ("minilm", "dev.csv", "test.csv")
    assert spec.train.validate_every == recipe["validate_every"] and spec.max_length == recipe["max_length"]

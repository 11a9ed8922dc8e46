"""The Train page on a user's own data (AppTest): the auto recipe read off the upload, and the Data page's
validation and test files handed to the run."""
from core.training.presets import auto_options
from core.training.presets import PRESETS
from lab.navigation import TRAIN
from lab.session import job_queue
from lab.training_view import preset_label


def test_an_upload_opens_on_the_auto_recipe_and_says_what_it_read(runs_root, open_page, sample_pairs):
    pairs, report = sample_pairs
    at = open_page(TRAIN.path, pairs=pairs, data_report=report, data_name="forum.csv (upload)")
    assert not at.exception, at.exception
    menu = at.selectbox(key="preset")
    assert menu.value == "auto" and menu.options == [preset_label(name) for name in PRESETS]  # no "Custom settings"
    recipe = auto_options(pairs, "cpu")
    [summary] = [box.value for box in at.info if box.value.startswith("Read off")]
    assert summary.split("  \n") == list(recipe.summary)
    questions = len(set(pairs["question1"]) | set(pairs["question2"]))
    assert f"Read off {len(pairs):,} pairs: {questions:,} distinct questions" in summary
    assert f"max_length {recipe.options['max_length']}" in summary
    assert f"batch size {recipe.options['batch_size']}" in summary
    assert f"Validation: {recipe.options['val_fraction']:.0%} of the pairs held out" in summary
    assert "Expected time on this CPU: about " in summary
    assert at.number_input(key="val_fraction").value == recipe.options["val_fraction"]
    assert "A share of the pairs is held out for validation" in at.markdown[0].value

    at.number_input(key="epochs").set_value(1).run()  # a change by hand: custom settings, the rest kept
    assert not at.exception, at.exception
    menu = at.selectbox(key="preset")
    assert menu.value == "custom" and menu.options[-1] == "Custom settings (changed from auto)"
    assert at.number_input(key="batch_size").value == recipe.options["batch_size"]
    assert at.selectbox(key="model").value == "minilm" and at.number_input(key="epochs").value == 1
    assert not [box for box in at.info if box.value.startswith("Read off")]  # no longer what auto picked


def test_the_bundled_sample_still_opens_on_sample_demo(runs_root, open_page):
    at = open_page(TRAIN.path)
    assert at.selectbox(key="preset").value == "sample-demo"


def test_with_a_validation_file_no_share_is_offered(runs_root, open_page, sample_pairs):
    pairs, report = sample_pairs
    train, val = pairs.iloc[60:], pairs.iloc[:60]
    at = open_page(TRAIN.path, pairs=train, data_report=report, data_name="forum.csv (upload)",
                   held_out_files={"val": (val, "dev.csv")})
    assert not at.exception, at.exception
    assert "val_fraction" not in [widget.key for widget in at.number_input]
    assert "Your validation file **dev.csv** (60 pairs) picks the best weights" in at.markdown[0].value
    [summary] = [box.value for box in at.info if box.value.startswith("Read off")]
    assert "Validation: your validation file." in summary


def test_an_upload_starts_from_the_auto_recipe_and_trains_with_its_validation_and_test_files(runs_root, open_page,
                                                                                           sample_pairs):
    pairs, report = sample_pairs
    train, val, test = pairs.iloc[100:], pairs.iloc[:60], pairs.iloc[60:100]
    at = open_page(TRAIN.path, pairs=train, data_report=report, data_name="forum.csv (upload)",
                   held_out_files={"val": (val, "dev.csv"), "test": (test, "test.csv")})
    assert not at.exception, at.exception
    assert at.selectbox(key="preset").value == "auto"  # the default on an upload
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


def test_new_data_under_an_untouched_recipe_brings_its_own_recipe(runs_root, open_page, sample_pairs):
    at = open_page(TRAIN.path)
    assert at.selectbox(key="preset").value == "sample-demo"
    pairs, _ = sample_pairs
    at.session_state["pairs"], at.session_state["data_name"] = pairs.iloc[100:], "forum.csv (upload)"
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="preset").value == "auto"
    assert at.number_input(key="epochs").value == auto_options(pairs.iloc[100:], "cpu").options["epochs"]


def test_a_recipe_the_user_picked_stays_when_the_data_changes(runs_root, open_page, sample_pairs):
    at = open_page(TRAIN.path)
    at.selectbox(key="preset").set_value("minilm-quora").run()
    pairs, _ = sample_pairs
    at.session_state["pairs"], at.session_state["data_name"] = pairs.iloc[100:], "forum.csv (upload)"
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="preset").value == "minilm-quora"

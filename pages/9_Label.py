"""Label: answer the pairs the model is least sure of, retrain from where the model is, watch the learning curve."""
import streamlit as st

from core.data import DataError
from core.training.active_rounds import HELD_OUT_SHARE, ROUND_SIZE, labels_path, share_counts
from lab import label_view
from lab.cached import encode_with_progress, pick_corpus
from lab.figures import PLOTLY_CONFIG, learning_curve_chart
from lab.session import enter_through_app, model_or_stop, model_picker, show_error

enter_through_app(__file__)

st.title("Label pairs")
st.caption(f"Each question of the corpus is paired with its nearest neighbours under the model; each round asks "
           f"the {ROUND_SIZE} pairs whose similarity is closest to the model's threshold (no question twice, a few "
           f"at random). Every answer is saved at once. {HELD_OUT_SHARE:.0%} of the labels, fixed by the pair's "
           "text, are held out: they calibrate the threshold and score each retrained model, never train it. "
           "A pair keeps one label: answering it again, here or in another tab, changes it.")

choice = model_picker()
name, texts, key = pick_corpus("label")

labels_file = labels_path(st.session_state.runs_root, name, key)
labels = label_view.store(labels_file)
label_view.record_finished_retrains()  # a retrain that just ended joins the curve before its model encodes anything
_, config = model_or_stop(choice)

corpus = encode_with_progress(lambda progress: label_view.embedded_corpus(choice, key, texts, progress=progress),
                              "Encoding the questions (once per model)")
if len(corpus) < 2:
    show_error(f"{name} has {len(corpus)} distinct question(s): a pair needs two.")
    st.stop()

try:
    shares = share_counts(labels)  # by share and class: one query, the labels never read
except DataError as error:  # a database this lab cannot use: said in one line, never a traceback
    show_error(f"The labels of {name} cannot be read: {error}")
    st.stop()
label_view.show_notices(labels)
pair = label_view.pending_pair(choice, key, config, corpus, labels)
answered, round_size = label_view.round_progress(labels)
st.markdown(f"**{shares.training + shares.held_out:,} labelled, {shares.held_out:,} held out** · "
            f"{len(corpus):,} questions of {name}")
if round_size:
    st.progress(answered / round_size, text=f"This round: {answered} of {round_size} pairs answered or skipped")
st.caption("Saved on the server as you answer; download them below as a pairs file for the Data and Train pages.")

if pair is None:
    st.info("No pair left to ask: every near pair of this corpus is labelled or skipped. Retrain, or pick another "
            "model: its neighbours differ.")
else:
    with st.container(border=True):
        for number, column in enumerate(st.columns(2), start=1):
            column.markdown(f"**Question {number}**")
            column.text(pair[f"question{number}"])
        reason = "closest to the threshold" if pair["reason"] == "uncertain" else "drawn at random, for an honest score"
        threshold = st.session_state[label_view.ROUND]["threshold"]
        st.caption(f"Similarity {pair['similarity']:.3f} (threshold {threshold:.3f}); asked because it is {reason}.")
        yes, no, skip = st.columns(3)
        question_pair = (labels, pair["question1"], pair["question2"])
        yes.button("Duplicate", key="label_duplicate", shortcut="D", width="stretch",
                   on_click=label_view.answer, args=(*question_pair, 1))
        no.button("Not duplicate", key="label_not_duplicate", shortcut="N", width="stretch",
                  on_click=label_view.answer, args=(*question_pair, 0))
        skip.button("Skip", key="label_skip", shortcut="S", width="stretch", on_click=label_view.skip, args=(pair,))

undo_column, retrain_column = st.columns(2)
undo_column.button("Undo last answer", key="label_undo", shortcut="U", disabled=not label_view.can_undo(labels), icon=":material/undo:",
                   on_click=label_view.undo, args=(labels,),
                   help="Takes back this session's last answer; its pair is asked again.")
training, blocker = any(not job.finished for job in label_view.retrains()), label_view.retrain_blocker(shares)
if retrain_column.button("Retrain now", key="label_retrain", disabled=training or blocker is not None,
                         icon=":material/model_training:",
                         help="Your retrain is queued or training: wait for it." if training else blocker or
                         "Fine-tunes the current model on the labels not held out, on the job queue like any run.") \
        and label_view.start_retrain(choice, labels_file, labels):
    st.rerun()  # draws Retrain now disabled while the run is queued or training
if blocker and not training:
    st.caption(blocker)
label_view.retrain_status()
label_view.show_recent(labels)
label_view.transfer(labels, f"labels-{labels_file.stem}.csv")

st.subheader("Learning curve")
points = label_view.curve_points(labels_file)
if points:
    label_view.show_held_out_figures(points)
    st.plotly_chart(learning_curve_chart(points), width="stretch", key="label_curve", config=PLOTLY_CONFIG)
    st.caption("Each point is a model scored on the labels held out when it was trained, against the labels it "
               "trained on (held-out ones never count); zero-shot MiniLM trained on none. Models retrained since "
               "answer on more held-out labels.")
else:
    st.caption("The curve starts with your first retrain: zero-shot MiniLM and the retrained model, scored on the "
               "same held-out labels.")

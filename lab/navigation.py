"""The lab's pages in sidebar order: the one list that `app.py` hands to ``st.navigation`` and that the Home
page's "How to use the lab" links read, so a page's title, icon and URL are written only here. Each page file
starts with ``lab.session.enter_through_app(__file__)``.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LabPage:
    number: int  # the page file is pages/<number>_<title, spaces as underscores>.py
    title: str  # the sidebar label; the browser tab reads "<title> · Siamese Lab"
    icon: str
    purpose: str = ""  # what you do there, for the Home page's list of steps

    @property
    def path(self) -> str:  # relative to the repository root (app.py's folder)
        return f"pages/{self.number}_{self.title.replace(' ', '_')}.py"

    @property
    def url_path(self) -> str:  # the URL the page had under the old pages/ folder; "" for Home, the default page
        return self.title.replace(" ", "_") if self.number else ""


HOME = LabPage(0, "Home", ":material/home:")
DATA = LabPage(1, "Data", ":material/table_view:", "keep the bundled sample or upload your own CSV / TSV pairs")
TRAIN = LabPage(2, "Train", ":material/model_training:", "pick a model, a loss and hyperparameters; watch the loss live")
SIMILARITY = LabPage(3, "Similarity matrix", ":material/grid_on:", "see one batch through the losses")
VERDICT = LabPage(4, "Verdict", ":material/balance:", "type two questions and get same / not the same")
SEARCH = LabPage(5, "Search", ":material/search:", "find the stored questions closest to a new one")
COMPARE = LabPage(6, "Compare", ":material/bar_chart:", "every trained model and two baselines, scored on the same pairs")
MAP = LabPage(7, "Map", ":material/scatter_plot:", "the dataset's questions as a 2-D map of the model's vectors")
DEDUPLICATE = LabPage(8, "Deduplicate", ":material/join_inner:", "group a corpus's near-duplicate questions into clusters")
LABEL = LabPage(9, "Label", ":material/label:",
                "answer the pairs the model is least sure of, retrain, and watch the learning curve")

PAGES = (HOME, DATA, TRAIN, SIMILARITY, VERDICT, SEARCH, COMPARE, MAP, DEDUPLICATE, LABEL)  # Home first: the default page

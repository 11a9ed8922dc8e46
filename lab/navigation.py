"""The lab's pages in sidebar order: the one list that `app.py` hands to ``st.navigation`` and that the Home
page's "How to use the lab" links read, so a page's title, icon and URL are written only here. Each page file
starts with ``lab.session.enter_through_app(__file__)``.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LabPage:
    path: str  # the page file, relative to the repository root (app.py's folder)
    title: str  # the sidebar label; the browser tab reads "<title> · Siamese Lab"
    icon: str
    url_path: str  # the URL the page had under the old pages/ folder; "" for Home, the default page at /
    purpose: str = ""  # what you do there, for the Home page's list of steps


HOME = LabPage("pages/0_Home.py", "Home", ":material/home:", "")
DATA = LabPage("pages/1_Data.py", "Data", ":material/table_view:", "Data",
               "keep the bundled sample or upload your own CSV / TSV pairs")
TRAIN = LabPage("pages/2_Train.py", "Train", ":material/model_training:", "Train",
                "pick a model, a loss and hyperparameters; watch the loss live")
SIMILARITY = LabPage("pages/3_Similarity_matrix.py", "Similarity matrix", ":material/grid_on:", "Similarity_matrix",
                     "see one batch through the losses")
VERDICT = LabPage("pages/4_Verdict.py", "Verdict", ":material/balance:", "Verdict",
                  "type two questions and get same / not the same")
SEARCH = LabPage("pages/5_Search.py", "Search", ":material/search:", "Search",
                 "find the stored questions closest to a new one")
COMPARE = LabPage("pages/6_Compare.py", "Compare", ":material/bar_chart:", "Compare",
                  "every trained model and two baselines, scored on the same pairs")
MAP = LabPage("pages/7_Map.py", "Map", ":material/scatter_plot:", "Map",
              "the dataset's questions as a 2-D map of the model's vectors")
DEDUPLICATE = LabPage("pages/8_Deduplicate.py", "Deduplicate", ":material/join_inner:", "Deduplicate",
                      "group a corpus's near-duplicate questions into clusters")

LABEL = LabPage("pages/9_Label.py", "Label", ":material/label:", "Label",
                "answer the pairs the model is least sure of, retrain, and watch the learning curve")

PAGES = (HOME, DATA, TRAIN, SIMILARITY, VERDICT, SEARCH, COMPARE, MAP, DEDUPLICATE, LABEL)  # Home first: the default page

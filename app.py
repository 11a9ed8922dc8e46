"""Siamese Lab, the Streamlit app: `streamlit run app.py` (or `make run`). It declares the pages
(``lab.navigation.PAGES``, Home the default), runs the one page setup (``lab.session.setup_page``) and the page
st.navigation picked; a test opens a page with ``AppTest.from_file("app.py")`` and ``switch_page``."""
import streamlit as st

from lab.navigation import HOME, PAGES
from lab.session import open_deep_link, setup_page
from lab.shutdown import exit_promptly

# Hidden: the sidebar lists the pages itself (lab.session.setup_page), with links that carry the workspace.
page = st.navigation([st.Page(lab_page.path, title=lab_page.title, icon=lab_page.icon,
                              url_path=lab_page.url_path, default=lab_page is HOME) for lab_page in PAGES],
                     position="hidden")
exit_promptly()  # once per process: a server stopped while runs train or pages score exits within seconds
open_deep_link()  # a fresh server's first visit to /Train ran that page alone; it is opened now
setup_page(page.title)
page.run()

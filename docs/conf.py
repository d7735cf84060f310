"""Sphinx configuration of the tutorial's site: these pages plus the eight executed notebooks.

Build (the test suite builds it too, warnings as errors, so a broken internal link fails the tests)::

    .venv/bin/python -m sphinx -W --keep-going -b html -c docs . docs/_build/html

The source folder is the repository (so that a page links a notebook as ``../notebooks/05_train.ipynb``, which
works on the code host too), narrowed to ``docs/`` and the executed notebooks. The notebooks are shown with the
outputs committed in ``notebooks/*.ipynb``; nothing is executed here.
"""

project = "raytrain-tutorial"
author = "raytrain-tutorial contributors"
copyright = "2026, raytrain-tutorial contributors"

extensions = ["myst_nb"]
root_doc = "docs/index"
include_patterns = ["docs/**", "notebooks/*.ipynb"]
exclude_patterns = ["docs/_build", "**/.ipynb_checkpoints"]

nb_execution_mode = "off"  # the committed outputs are the ones nbval checks; the site shows them as they are
myst_heading_anchors = 3  # "page.md#a-heading" links resolve, and a wrong anchor is a warning
myst_enable_extensions = ["colon_fence"]
suppress_warnings = ["mystnb.unknown_mime_type"]  # ipywidgets' view state has no static rendering

# The theme Jupyter Book uses for executed notebooks: a wide content column (code cells and the notebooks' tables
# of up to 115 characters do not scroll sideways at 1,280 px; tests/browser/test_site.py looks), the page's own
# contents on the right, the chapters on the left.
html_theme = "sphinx_book_theme"
html_title = "raytrain-tutorial"
html_theme_options = {
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "secondary_sidebar_items": [],  # the page's contents stay in the header's list: the article takes the width
}
html_static_path = ["_static"]
html_css_files = ["wide.css"]
html_extra_path = ["_root"]  # index.html at the site's root, leading to docs/index.html: one link to hand out

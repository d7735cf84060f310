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

html_theme = "alabaster"
html_title = "raytrain-tutorial"
html_theme_options = {"description": "FSDP with Ray Train on KubeRay/EKS, in eight notebooks", "fixed_sidebar": True}
html_extra_path = ["_root"]  # index.html at the site's root, leading to docs/index.html: one link to hand out

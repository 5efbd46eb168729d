"""The Sphinx extensions of the HTML and PDF builds, registered in ``_config.yml`` under ``sphinx:
local_extensions`` (they import the Sphinx library as ``sphinx``: absolute imports only here). The
modules, one job each:

- ``ext``: the book's rendering: PDF numbering and link, citations, proofs, indexes, the book index.
- ``colab``: each chapter page's Colab button and download menu give the plain-notebook edition.
"""

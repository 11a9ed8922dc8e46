"""The command line, ``python -m core``: ``main`` (the parser and ``main(argv)``) over one module per
command group (train, predict, corpus, export, score, dedup) over ``common``, the helpers they share."""

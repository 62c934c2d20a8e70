"""Pieces every report shares, below the products: text tables, HTML tables, figures (matplotlib, the
``[plot]`` extra), and where the command line's output goes (``output``)."""

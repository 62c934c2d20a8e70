"""The static site (``flopcalc site --out DIR``): every bundled card's law, energy and memory in one offline page
that evaluates exactly what the command line evaluates (:mod:`flopcalc.site.export` writes the data,
:mod:`flopcalc.site.writer` the files)."""

"""The command line (``flopcalc …``): ``main`` parses and dispatches; each product's commands live in their
own module and build only their own parser."""

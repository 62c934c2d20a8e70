"""The HTML report page (``flopcalc report``): one self-contained page assembled from each product's
section."""

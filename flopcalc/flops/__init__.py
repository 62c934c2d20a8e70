"""What one generation costs in FLOPs: the exact estimate per component and per block (``estimate``), its
renderings (``report``), the closed-form law in H, W, steps, passes, batch, text length and frames
(``symbolic``, ``symbolic_report``), sweeps of that law (``sweep``), its figures (``plots``), Kaplan's
approximation beside the exact count (``kaplan``), what diffusers classes are covered (``coverage``) and the
FLOPs section of the HTML page (``html``)."""

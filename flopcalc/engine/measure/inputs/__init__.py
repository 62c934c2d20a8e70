"""Input builders of the measuring harness, one module per model family (every module in this
folder is imported by :mod:`flopcalc.engine.measure.harness`): ``@input_builder("ClassName", settings=...,
calls=...)`` turns pipeline-level settings into the meta tensors the class's call takes."""

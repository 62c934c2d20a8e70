"""The hardware the predictors run on: the GPU table (``gpus``: dense peaks per dtype, memory, bandwidth,
TDP, each with its source)."""

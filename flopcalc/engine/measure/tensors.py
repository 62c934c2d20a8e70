"""The inputs the measuring harness feeds a real module: shapes and dtypes, made as zeros on the meta device."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of one input tensor (materialised as zeros on the meta device)."""

    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32

    def make(self) -> torch.Tensor:
        return torch.zeros(self.shape, dtype=self.dtype, device="meta")


def _f32(*shape: int) -> TensorSpec:
    return TensorSpec(tuple(int(s) for s in shape), torch.float32)


def _ids(*shape: int) -> TensorSpec:
    return TensorSpec(tuple(int(s) for s in shape), torch.int64)

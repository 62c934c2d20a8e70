"""When transformers keeps a class's ``_keep_in_fp32_modules`` (T5's and UMT5's ``wo``) in float32: it depends on
the transformers release, the dtype asked for and the quantizer.

Read in each release's ``modeling_utils.py`` (the wheels from PyPI):

==================  ===========================================================  ==========================================
releases            ``_keep_in_fp32_modules`` in float32 when                    source (file:line in that release)
==================  ===========================================================  ==========================================
4.30 – 4.49         ``torch_dtype == float16``, or the quantizer is bitsandbytes  4.30.0 ``modeling_utils.py:2639-2643``
                    (4-bit or 8-bit)                                             (``load_in_4bit or load_in_8bit``); 4.40.0
                                                                                 ``modeling_utils.py:3516-3517``
                                                                                 (``hasattr(hf_quantizer,
                                                                                 "use_keep_in_fp32_modules")``, set by
                                                                                 ``quantizer_bnb_4bit.py:48`` and
                                                                                 ``quantizer_bnb_8bit.py:48`` only)
4.50.x              always (any dtype, any quantizer or none)                    4.50.0 ``modeling_utils.py:4416-4419``,
                                                                                 ``:736`` (the regex is built whenever the
                                                                                 class declares the modules)
4.51 – 4.57         ``dtype == float16``, or the quantizer's                     4.57.6 ``modeling_utils.py:4984-4987``;
                    ``use_keep_in_fp32_modules`` (bitsandbytes)                  ``quantizer_bnb_4bit.py:59``,
                                                                                 ``quantizer_bnb_8bit.py:55``
5.0.x               always (the class's ``dtype_plan``)                          5.0.0 ``modeling_utils.py:1326-1327``,
                                                                                 ``core_model_loading.py:1170-1173``
5.1 and later       ``dtype == float16`` only, whatever the quantizer            5.1.0 ``modeling_utils.py:3573``; 5.23.0
                                                                                 ``modeling_utils.py:3842``
==================  ===========================================================  ==========================================

Whether kept or not, the quantizers never convert those modules (they are in ``modules_to_not_convert`` in every
release: 5.23.0 ``quantizers/quantizer_bnb_4bit.py:121-123``, ``quantizers/base.py:273-274``); only their dtype
(float32 or the loading dtype) changes. The default version is the one the ``[validate]`` extra pins.
"""

from __future__ import annotations

import re

from flopcalc.engine.errors import FlopcalcError

#: The transformers release the ``[validate]`` extra pins (pyproject.toml): the default rule.
PINNED = "5.23.0"
#: The release whose rule differs most from the pinned one for quantized loads, named in the notes.
OTHER = "4.57.6"
#: The ``keep_in_fp32_dtypes`` a transformers class declares for ``_keep_in_fp32_modules`` (the pinned rule).
TRANSFORMERS_NON_STRICT = ("fp16",)

_VERSION = re.compile(r"(\d{1,3})\.(\d{1,3})(?:\.(\d{1,4}))?(?:[.\-+]?[0-9A-Za-z.]*)?")


def parse_version(text: str) -> tuple[int, int]:
    """``(major, minor)`` of a transformers release such as ``4.57.6`` or ``5.1``; refuses what it cannot read and
    releases before 4.30, where these rules were not checked."""
    m = _VERSION.fullmatch(text.strip()) if isinstance(text, str) and len(text) <= 40 else None
    if m is None:
        raise FlopcalcError(f"--transformers-version {text!r}: expected a release such as {PINNED} or {OTHER}")
    major, minor = int(m.group(1)), int(m.group(2))
    if (major, minor) < (4, 30) or major > 5:
        raise FlopcalcError(f"--transformers-version {text}: the keep-in-float32 rule is known for 4.30 to 5.x "
                            "releases only")
    return major, minor


def keeps_fp32(version: str, dtype: str, quant_library: str | None) -> bool:
    """Whether transformers ``version`` keeps a class's (non-strict) ``_keep_in_fp32_modules`` in float32 when
    loading in ``dtype`` (``bf16``/``fp16``/``fp32``; a quantized load's non-quantized layers are in ``bf16``) with
    the quantizer of ``quant_library`` (``None``: no quantizer)."""
    release = parse_version(version)
    if release[0] == 5:
        return release == (5, 0) or dtype == "fp16"
    if release[:2] == (4, 50):
        return True
    return dtype == "fp16" or quant_library == "bitsandbytes"

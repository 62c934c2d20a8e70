r"""``MultilingualCLIP`` (diffusers ``pipelines/kandinsky/text_encoder.py``), Kandinsky 2.1's text encoder: an
``XLMRobertaModel`` (``transformer``: a BERT-shaped encoder, its pooler included, which ``forward`` runs) and
``LinearTransformation``, a linear map of the attention-mask-weighted mean of the token states (``transformerDimensions``
→ ``numDims``) to the CLIP image-embedding width. On :math:`n` tokens of width :math:`d`:

.. math:: \mathrm{MACs} = \mathrm{MACs}_\text{XLM-R}(n) + d_t\,d_c

(the BERT formulas: :func:`flopcalc.formulas.decoder_layer.bert_layer`, embeddings, pooler).
"""

from __future__ import annotations

from flopcalc.engine.architectures.llm_encoders import BERT_DEFAULTS, bert_model_tree
from flopcalc.engine.config import FLAG, LAYERS, SIZE, Config, declare_keys, positive_int
from flopcalc.engine.cost import Node
from flopcalc.engine.loading import Buffer, loading_rules
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops

SOURCE = "diffusers/pipelines/kandinsky/text_encoder.py"

#: ``MCLIPConfig`` (an ``XLMRobertaConfig``): XLM-R's defaults, ``transformerDimSize`` 1024, ``imageDimSize`` 768
#: (saved as ``transformerDimensions`` / ``numDims``).
DEFAULTS = {**BERT_DEFAULTS, "max_position_embeddings": 512, "type_vocab_size": 2,
            "transformerDimensions": 1024, "numDims": 768}

declare_keys("MultilingualCLIP", {
    "vocab_size": SIZE, "hidden_size": SIZE, "num_hidden_layers": LAYERS, "num_attention_heads": SIZE,
    "intermediate_size": SIZE, "max_position_embeddings": SIZE, "type_vocab_size": SIZE, "is_decoder": FLAG,
    "add_cross_attention": FLAG, "transformerDimensions": SIZE, "numDims": SIZE,
})


@register("MultilingualCLIP", role="text_encoder", defaults=DEFAULTS, source=SOURCE)
def multilingual_clip(config: Config, shape: RunShape) -> Node:
    """``MultilingualCLIP.forward(input_ids, attention_mask)`` on ``seq_len`` tokens (Kandinsky 2.1 pads to 77)."""
    transformer = bert_model_tree(config, shape.seq_len, pooler=True)
    linear = Node("LinearTransformation", ops.linear(1, positive_int(config, "transformerDimensions"),
                                                     positive_int(config, "numDims")))
    return Node("text_encoder", children=(Node("transformer", children=transformer.children), linear),
                formula="multilingual_clip")


def _xlm_roberta_buffers(config: Config) -> tuple[Buffer, ...]:
    """``XLMRobertaEmbeddings``: non-persistent int64 ``position_ids`` and ``token_type_ids``
    (1, max_position_embeddings)."""
    positions = positive_int(config, "max_position_embeddings")
    return (Buffer("transformer.embeddings.position_ids", positions, "int64"),
            Buffer("transformer.embeddings.token_type_ids", positions, "int64"))


loading_rules("MultilingualCLIP", buffers=_xlm_roberta_buffers,
              source="transformers/models/xlm_roberta/modeling_xlm_roberta.py (XLMRobertaEmbeddings)")

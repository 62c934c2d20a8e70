"""Qwen-Image transformer: ``QwenImageTransformer2DModel`` (diffusers
``models/transformers/transformer_qwenimage.py``); block formula in ``formulas/qwen_image.py``.

``QwenImagePipeline`` packs the ``z × H/8 × W/8`` latent into 2×2 patches (``_pack_latents``), so
the model sees ``N = (H/16)(W/16)`` image tokens of ``in_channels = 4z`` features and ``T`` text
tokens (Qwen2.5-VL hidden states of width ``joint_attention_dim``):

* ``img_in`` (in_channels → d) on the N tokens; ``txt_norm`` (RMSNorm) and ``txt_in`` (→ d) on the T;
* ``time_text_embed``: sinusoidal projection, then ``timestep_embedder`` (256 → d → d), on one
  timestep, or two with ``zero_cond_t`` (the timestep and a zero one); ``addition_t_embedding``
  (``nn.Embedding(2, d)``) with ``use_additional_t_cond``;
* ``pos_embed`` (``QwenEmbedRope`` / ``QwenEmbedLayer3DRope``): frequency tables built at init and
  sliced per call, no parameters, no counted work;
* the edit pipelines append each reference image's packed latent (``RunShape.reference_tokens``) to the
  N image tokens: every image-side module runs on them too, and ``proj_out`` too (the pipeline slices after);
* ``num_layers`` dual-stream blocks; ``norm_out`` (``AdaLayerNormContinuous``, d → 2d) and
  ``proj_out`` (d → patch² · out_channels) on the image tokens.

``guidance_embeds`` adds no module (diffusers keeps it as a config flag only).
"""

from __future__ import annotations

from flopcalc.engine.gradients import gradient_graph
from flopcalc.engine.config import FLAG, LAYERS, NULL, SIZE, SIZES, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_continuous, mlp_embedder
from flopcalc.formulas.qwen_image import qwen_image_block
from flopcalc.engine.gradients import Attend, Blocks, Join, Layer, LoraFlow
from flopcalc.engine.registry import RunShape, register

#: ``QwenImageTransformer2DModel.__init__`` keyword defaults (transformer_qwenimage.py).
DEFAULTS = {
    "patch_size": 2,
    "in_channels": 64,
    "out_channels": 16,
    "num_layers": 60,
    "attention_head_dim": 128,
    "num_attention_heads": 24,
    "joint_attention_dim": 3584,
    "guidance_embeds": False,
    "axes_dims_rope": (16, 56, 56),
    "zero_cond_t": False,
    "use_additional_t_cond": False,
    "use_layer3d_rope": False,
}

#: QwenImagePipeline packs 2×2 latent patches into one token (``_pack_latents``).
PACKING = 2
#: ``QwenTimestepProjEmbeddings``: ``Timesteps(num_channels=256)`` feeds ``TimestepEmbedding(256, d)``.
TIMESTEP_CHANNELS = 256


#: Every config key ``QwenImageTransformer2DModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("QwenImageTransformer2DModel", {
    "patch_size": SIZE, "in_channels": SIZE, "out_channels": SIZE | NULL, "num_layers": LAYERS,
    "attention_head_dim": SIZE, "num_attention_heads": SIZE, "joint_attention_dim": SIZE,
    "guidance_embeds": FLAG, "axes_dims_rope": SIZES, "zero_cond_t": FLAG, "use_additional_t_cond": FLAG,
})


@register("QwenImageTransformer2DModel", role="denoiser", defaults=DEFAULTS,
          source="diffusers/models/transformers/transformer_qwenimage.py")
def qwen_image_transformer(config: Config, shape: RunShape) -> Node:
    heads = positive_int(config, "num_attention_heads")
    head_dim = positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    in_channels = positive_int(config, "in_channels")
    out_channels = config["out_channels"] or in_channels
    patch = positive_int(config, "patch_size")
    text_dim = positive_int(config, "joint_attention_dim")
    zero_cond = bool(config["zero_cond_t"])
    rows = 2 if zero_cond else 1  # zero_cond_t: timestep batch is [t, 0]
    # the edit pipelines append the reference images' packed latents to the image tokens (img_shapes lists them)
    # and the layered pipeline packs layers + 1 latents of the output size (``latent_frames``)
    n = (shape.latent_frames or 1) * ops.exact_div(shape.latent_height, PACKING) \
        * ops.exact_div(shape.latent_width, PACKING) + (shape.reference_tokens or 0)
    t = shape.text_len

    embed = [mlp_embedder("timestep_embedder", TIMESTEP_CHANNELS, dim, tokens=rows)]
    if config["use_additional_t_cond"]:
        embed.append(Node("addition_t_embedding", ops.embedding(2, dim)))
    block = qwen_image_block(dim=dim, heads=heads, head_dim=head_dim, image_tokens=n, text_tokens=t,
                             image_mod_rows=rows)
    return Node(
        "transformer",
        children=(
            Node("img_in", ops.linear(n, in_channels, dim)),
            Node("txt_norm", ops.rms_norm(t, text_dim)),
            Node("txt_in", ops.linear(t, text_dim, dim)),
            Node("time_text_embed", children=tuple(embed)),
            module_list("transformer_blocks", [block] * count_int(config, "num_layers")),
            ada_layer_norm_continuous("norm_out", dim, dim, n),
            Node("proj_out", ops.linear(n, dim, patch * patch * out_channels)),
        ),
        formula="qwen_image_transformer",
    )


#: ``QwenImageTransformerBlock.forward`` (transformer_qwenimage.py:676-745) with
#: ``QwenDoubleStreamAttnProcessor2_0`` (:517-586), in the order it runs: the image stream ``img`` and the text
#: stream ``txt`` projected by their own q/k/v, one joint attention over ``[txt, img]``, each stream's output
#: projection added through its gate (:723-724), then the image MLP (:727-731) before the text MLP (:734-737).
#: ``img_mod`` / ``txt_mod`` read ``temb`` only (:687-691). The last block's text output is returned to a
#: forward that never reads it (:982 uses ``hidden_states`` only): its ``to_add_out`` and ``txt_mlp`` get no
#: backward (:func:`flopcalc.training.lora._live`).
QWEN_BLOCK_FLOW = (
    *(Layer(f"attn.{p}", ("img",), p) for p in ("to_q", "to_k", "to_v")),
    *(Layer(f"attn.{p}", ("txt",), p) for p in ("add_q_proj", "add_k_proj", "add_v_proj")),
    Attend("attn", q=("add_q_proj", "to_q"), k=("add_k_proj", "to_k"), v=("add_v_proj", "to_v"), to="o"),
    Layer("attn.to_out.0", ("o",), "a"),
    Layer("attn.to_add_out", ("o",), "ca"),
    Join(("img", "a"), "img", gated="a"),  # :723 hidden_states + img_gate1 * img_attn_output
    Join(("txt", "ca"), "txt", gated="ca"),  # :724
    Layer("img_mlp.net.0.proj", ("img",), "h"),
    Layer("img_mlp.net.2", ("h",), "f"),
    Join(("img", "f"), "img", gated="f"),  # :731
    Layer("txt_mlp.net.0.proj", ("txt",), "ch"),
    Layer("txt_mlp.net.2", ("ch",), "cf"),
    Join(("txt", "cf"), "txt", gated="cf"),  # :737
)

gradient_graph(
    "QwenImageTransformer2DModel",
    # transformer_qwenimage.py:916 img_in(latents); :184-186 timestep_embedder.linear_1 reads the sinusoidal
    # projection. txt_in (:931) reads txt_norm's output, which requires grad (RMSNorm's weight is trained).
    input_layers=("img_in", "time_text_embed.timestep_embedder.linear_1"),
    # transformer_qwenimage.py:950-960: each block is checkpointed; its last op saving tensors is the text MLP's
    # gate multiply (:737), after every layer: the whole block runs again
    checkpointed=("transformer_blocks.*",),
    source="diffusers/models/transformers/transformer_qwenimage.py:916-983",
    lora=LoraFlow(
        steps=(
            Layer("img_in", ("latents",), "img"),  # :916
            Layer("txt_in", ("text",), "txt"),  # :930-931 (txt_norm: no MACs; frozen under LoRA)
            Blocks("transformer_blocks", QWEN_BLOCK_FLOW),
            Layer("proj_out", ("img",), "out"),  # :982-983 norm_out(hidden_states, temb), proj_out
        ),
        # the timestep embedder, every block's img_mod / txt_mod and norm_out's modulation read temb only
        frozen=("time_text_embed.**", "transformer_blocks.*.img_mod", "transformer_blocks.*.txt_mod",
                "norm_out.linear"),
        default_targets=("to_k", "to_q", "to_v", "to_out.0"),
        targets_source="diffusers examples/dreambooth/train_dreambooth_lora_qwen_image.py (commit "
                       "02303d1c25e5518047bf6ce529ed405a4d1e574d), main(): target_modules when --lora_layers is "
                       "not given",
        source="diffusers/models/transformers/transformer_qwenimage.py:517-586, 676-745, 916-983",
    ),
)

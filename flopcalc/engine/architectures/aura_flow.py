"""AuraFlow: ``AuraFlowTransformer2DModel`` (diffusers ``models/transformers/auraflow_transformer_2d.py``).

``forward``: ``pos_embed`` (``AuraFlowPatchEmbed``: the latent cut into p × p patches, a linear
``proj`` of each, plus a slice of the learned ``pos_embed`` table of ``pos_embed_max_size``
positions), ``time_step_proj`` on the 256-wide sinusoidal timestep, ``context_embedder`` (bias-free,
``joint_attention_dim`` → ``caption_projection_dim``) on the L caption tokens, then 8 learned
``register_tokens`` prepended to them (T = 8 + L), ``num_mmdit_layers``
:func:`~flopcalc.formulas.aura_flow.aura_flow_joint_block` blocks, ``num_single_dit_layers``
:func:`~flopcalc.formulas.aura_flow.aura_flow_single_block` blocks on the concatenated T + N tokens,
``norm_out`` (``AuraFlowPreFinalBlock``: a bias-free linear of the timestep embedding to scale and
shift) and the bias-free ``proj_out`` on the N image tokens.
"""

from __future__ import annotations

from flopcalc.engine.config import LAYERS, SIZE, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.aura_flow import REGISTER_TOKENS, aura_flow_joint_block, aura_flow_single_block
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.engine.registry import RunShape, register

#: ``AuraFlowTransformer2DModel.__init__`` keyword defaults.
DEFAULTS = {
    "sample_size": 64, "patch_size": 2, "in_channels": 4, "num_mmdit_layers": 4, "num_single_dit_layers": 32,
    "attention_head_dim": 256, "num_attention_heads": 12, "joint_attention_dim": 2048,
    "caption_projection_dim": 3072, "out_channels": 4, "pos_embed_max_size": 1024,
}
#: ``Timesteps(num_channels=256)`` feeding ``time_step_proj``.
TIMESTEP_CHANNELS = 256


#: Every config key ``AuraFlowTransformer2DModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("AuraFlowTransformer2DModel", {
    "sample_size": SIZE, "patch_size": SIZE, "in_channels": SIZE, "num_mmdit_layers": LAYERS,
    "num_single_dit_layers": LAYERS, "attention_head_dim": SIZE, "num_attention_heads": SIZE,
    "joint_attention_dim": SIZE, "caption_projection_dim": SIZE, "out_channels": SIZE, "pos_embed_max_size": SIZE,
})


@register("AuraFlowTransformer2DModel", role="denoiser", defaults=DEFAULTS,
          source="diffusers/models/transformers/auraflow_transformer_2d.py")
def aura_flow_transformer(config: Config, shape: RunShape) -> Node:
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    caption = positive_int(config, "caption_projection_dim")
    if caption != dim:
        raise ConfigError(f"{config.component}/config.json: caption_projection_dim {caption} must equal "
                          f"num_attention_heads × attention_head_dim = {dim} (the joint blocks' text stream is "
                          "built dim wide)")
    patch = positive_int(config, "patch_size")
    in_channels = positive_int(config, "in_channels")
    out_channels = positive_int(config, "out_channels")  # forward's unpatchify reads config.out_channels: None fails
    n = ops.exact_div(shape.latent_height, patch) * ops.exact_div(shape.latent_width, patch)
    t = REGISTER_TOKENS + shape.text_len
    joint = aura_flow_joint_block(dim=dim, heads=heads, head_dim=head_dim, image_tokens=n, text_tokens=t)
    single = aura_flow_single_block(dim=dim, heads=heads, head_dim=head_dim, tokens=n + t)
    pos_embed = Node("pos_embed", ops.parameters(positive_int(config, "pos_embed_max_size") * dim),
                     children=(Node("proj", ops.linear(n, patch * patch * in_channels, dim)),))
    return Node("transformer", ops.parameters(REGISTER_TOKENS * dim), children=(
        pos_embed,
        mlp_embedder("time_step_proj", TIMESTEP_CHANNELS, dim),
        Node("context_embedder", ops.linear(shape.text_len, positive_int(config, "joint_attention_dim"), caption,
                                            bias=False)),
        module_list("joint_transformer_blocks", [joint] * count_int(config, "num_mmdit_layers")),
        module_list("single_transformer_blocks", [single] * count_int(config, "num_single_dit_layers")),
        Node("norm_out", children=(Node("linear", ops.activation(dim) + ops.linear(1, dim, 2 * dim, bias=False)),)),
        Node("proj_out", ops.linear(n, dim, patch * patch * out_channels, bias=False)),
    ), formula="aura_flow_transformer")

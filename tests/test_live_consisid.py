"""Live re-measurement of ``ConsisIDTransformer3DModel`` (ConsisID), built on the meta device and counted now as
``ConsisIDPipeline`` calls it: one CFG-doubled call (two rows, the face modules once) on randomized configs (heads,
layers, cross-attention interval, the local facial extractor's widths, depth, scales, queries and id tokens, face on or
off) at random sizes, frame counts, text lengths and face ViT token counts.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path, summed over the call's rows), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import pytest

from live_support import SEED, measure, random_size, write_config  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.flops.estimate import estimate_configs  # noqa: E402

pytestmark = pytest.mark.live


def test_random_configs(rng, tmp_path):
    for i in range(2):
        interval, scales = rng.choice([1, 2]), rng.choice([1, 2])
        heads = rng.choice([2, 3])
        cfg = {"_class_name": "ConsisIDTransformer3DModel", "num_attention_heads": heads, "attention_head_dim": 16,
               "in_channels": 8, "out_channels": 4, "time_embed_dim": rng.choice([8, 16]), "text_embed_dim": 16,
               "num_layers": interval * rng.randint(1, 2), "sample_width": 4, "sample_height": 4, "sample_frames": 9,
               "patch_size": 2, "max_text_seq_length": 6, "use_rotary_positional_embeddings": True,
               "is_train_face": i == 0 or rng.random() < 0.5, "cross_attn_interval": interval,
               "cross_attn_dim_head": rng.choice([4, 8]), "cross_attn_num_heads": rng.choice([1, 2]),
               "LFE_id_dim": rng.choice([4, 6]), "LFE_vit_dim": rng.choice([8, 12]), "LFE_depth": scales * rng.randint(1, 2),
               "LFE_dim_head": 4, "LFE_num_heads": rng.choice([1, 2]), "LFE_num_id_token": rng.choice([1, 2]),
               "LFE_num_querie": rng.choice([2, 3]), "LFE_output_dim": int(heads * 16 / 3 * 2), "LFE_ff_mult": 2,
               "LFE_num_scale": scales}
        h, w = random_size(rng, 16, 16, 64), random_size(rng, 16, 16, 64)
        frames, text, tokens = 4 * rng.randint(0, 2) + 1, rng.randint(1, 12), rng.randint(2, 9)
        fx = measure.measure_component(write_config(tmp_path, f"consisid{i}", cfg), settings={
            "height": h, "width": w, "num_frames": frames, "text_len": text, "image_tokens": tokens, "rows": 2},
            with_thop=True)
        where = f"seed {SEED}, {cfg}, {h}x{w}, {frames} frames, L={text}, V={tokens}"
        report = estimate_configs({"_class_name": "ConsisIDPipeline"}, {"transformer": cfg}, Settings(
            height=h, width=w, num_frames=frames, max_sequence_length=text, steps=1))
        tree = report.component("transformer").tree
        rows = tree.children if tree.formula == "pieces" else (tree,)
        if cfg["is_train_face"]:  # the plan's face ViT tokens are the pipeline's 577; measure at the drawn count
            from flopcalc.engine.registry import RunShape, assemble

            run = RunShape(latent_height=h // 8, latent_width=w // 8, latent_frames=(frames - 1) // 4 + 1,
                           text_len=text, image_tokens=tokens)
            rows = (assemble(cfg, run, component="transformer"),
                    assemble(cfg, run.__class__(**{**vars(run), "split": "consisid_later_rows"}),
                             component="transformer"))
        else:
            rows = rows * (2 // len(rows))
        for path, flops in fx["torch"]["by_module"].items():
            total = sum(r.per_item.macs("torch") if path == "Global" else
                        (n.per_item.macs("torch") if (n := r.find(path)) else 0) for r in rows)
            assert 2 * total == flops, f"{path}: {where}"
        assert rows[0].total.params == fx["params"], where
        assert sum(r.total.macs("thop") for r in rows) == fx["thop"]["macs"], where

#!/usr/bin/env python3
# Synthetic MoE checkpoints in the Hugging Face layout (config.json + one
# model.safetensors; random bf16 weights, norms at 1.0) for batch and kernel
# benchmarks of families `flotilla-tool synth` does not make (it makes
# Kimi K3 only). Standard library only; the weights repeat one 64 KB block
# of N(0, 0.02) values, so a 1.5 GB model is written in seconds. Not
# trained models: their text is noise, their routing arbitrary.
#
#   bench/synth_moe.py qwen3_moe|deepseek_v3|gpt_oss OUT_DIR [NAME=VALUE...]
#   build/bin/flotilla-tool pack --model OUT_DIR
#   build/bin/flotilla-bench-batch --model OUT_DIR --mem 4G --batches 1,8
#
# Both: hidden 2048, 8 layers, 16 heads, 16 routed experts (top 4) of 768,
# vocab 8192. Qwen3-MoE: 4 KV heads of 128 (1.44 GB). DeepSeek-V3 (bf16, no
# quantization_config): MLA with q_lora 512, kv_lora 256, 64 + 32 / 64
# head dims, layer 0 dense (6144), one shared expert, grouped routing.
# gpt-oss: the release layout (fused MXFP4 experts as *_blocks / *_scales
# U8 with bf16 biases, attention biases and sinks, alternating sliding (128)
# and full layers, yarn rope); 32 heads / 8 KV of 64 as gpt-oss-20b, expert
# scale bytes 119 (2^-8) so the decoded weights are of the bf16 ones' size.
#
# NAME=VALUE overrides a size: hidden, layers, heads, experts, moe_inter,
# vocab, dense_inter, max_pos (max_position_embeddings), and for
# Qwen3-MoE head_dim and kv_heads. ends=ID makes a model that answers at
# once with token ID (its end of text): the embedding's column 0 is 4 in
# every row, the final norm keeps column 0 only, and lm_head row ID reads
# it with weight 10, so token ID's logit (about 80) dwarfs every other
# (tests of agent clients that must see a reply end; the agent test model
# of tests/agents is made so). The long-prompt
# model of the prefill bench (bench/prefill_long.sh) is Qwen3-MoE-shaped
# with the real vocabulary: hidden=256 layers=4 heads=4 vocab=151936
# max_pos=40960.
import json
import os
import random
import struct
import sys

H, L, NH, E, I_MOE, V, I_DENSE = 2048, 8, 16, 16, 768, 8192, 6144
MAX_POS = 4096
HEAD_DIM, KV_HEADS = 128, 4  # Qwen3-MoE's attention heads


def qwen3_moe():
    d, kv = HEAD_DIM, KV_HEADS
    cfg = dict(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe",
               attention_bias=False, bos_token_id=0, eos_token_id=1,
               head_dim=d, hidden_act="silu", hidden_size=H,
               intermediate_size=I_DENSE, max_position_embeddings=MAX_POS,
               moe_intermediate_size=I_MOE, norm_topk_prob=True,
               num_attention_heads=NH, num_experts=E, num_experts_per_tok=4,
               num_hidden_layers=L, num_key_value_heads=kv, rms_norm_eps=1e-6,
               rope_scaling=None, rope_theta=1000000.0, sliding_window=None,
               tie_word_embeddings=False, torch_dtype="bfloat16",
               use_sliding_window=False, vocab_size=V, decoder_sparse_step=1,
               mlp_only_layers=[])
    t = []
    for l in range(L):
        p = f"model.layers.{l}."
        t += [(p + "input_layernorm.weight", [H], "one"),
              (p + "post_attention_layernorm.weight", [H], "one"),
              (p + "self_attn.q_proj.weight", [NH * d, H], "w"),
              (p + "self_attn.k_proj.weight", [kv * d, H], "w"),
              (p + "self_attn.v_proj.weight", [kv * d, H], "w"),
              (p + "self_attn.o_proj.weight", [H, NH * d], "w"),
              (p + "self_attn.q_norm.weight", [d], "one"),
              (p + "self_attn.k_norm.weight", [d], "one"),
              (p + "mlp.gate.weight", [E, H], "w")]
        for e in range(E):
            t += Glu(p + f"mlp.experts.{e}.", I_MOE)
    return cfg, t


def deepseek_v3():
    ql, kvl, nope, rope, vd = 512, 256, 64, 32, 64
    cfg = dict(architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3",
               attention_bias=False, bos_token_id=0, eos_token_id=1, ep_size=1,
               first_k_dense_replace=1, hidden_act="silu", hidden_size=H,
               intermediate_size=I_DENSE, kv_lora_rank=kvl,
               max_position_embeddings=MAX_POS, moe_intermediate_size=I_MOE,
               moe_layer_freq=1, n_group=4, n_routed_experts=E,
               n_shared_experts=1, norm_topk_prob=True,
               num_attention_heads=NH, num_experts_per_tok=4,
               num_hidden_layers=L, num_key_value_heads=NH,
               num_nextn_predict_layers=0, q_lora_rank=ql,
               qk_nope_head_dim=nope, qk_rope_head_dim=rope,
               rms_norm_eps=1e-6, rope_scaling=None, rope_theta=10000,
               routed_scaling_factor=2.5, scoring_func="sigmoid", seq_aux=True,
               tie_word_embeddings=False, topk_group=2, topk_method="noaux_tc",
               torch_dtype="bfloat16", v_head_dim=vd, vocab_size=V)
    t = []
    for l in range(L):
        p = f"model.layers.{l}."
        a = p + "self_attn."
        t += [(p + "input_layernorm.weight", [H], "one"),
              (p + "post_attention_layernorm.weight", [H], "one"),
              (a + "q_a_proj.weight", [ql, H], "w"),
              (a + "q_a_layernorm.weight", [ql], "one"),
              (a + "q_b_proj.weight", [NH * (nope + rope), ql], "w"),
              (a + "kv_a_proj_with_mqa.weight", [kvl + rope, H], "w"),
              (a + "kv_a_layernorm.weight", [kvl], "one"),
              (a + "kv_b_proj.weight", [NH * (nope + vd), kvl], "w"),
              (a + "o_proj.weight", [H, NH * vd], "w")]
        if l == 0:
            t += Glu(p + "mlp.", I_DENSE)
            continue
        t += [(p + "mlp.gate.weight", [E, H], "w"),
              (p + "mlp.gate.e_score_correction_bias", [E], "f32zero")]
        for e in range(E):
            t += Glu(p + f"mlp.experts.{e}.", I_MOE)
        t += Glu(p + "mlp.shared_experts.", I_MOE)
    return cfg, t


def gpt_oss():
    d, kv = 64, 8
    nh = H // d
    cfg = dict(architectures=["GptOssForCausalLM"], attention_bias=True,
               attention_dropout=0.0, eos_token_id=1, experts_per_token=4,
               head_dim=d, hidden_act="silu", hidden_size=H,
               initial_context_length=4096, initializer_range=0.02,
               intermediate_size=I_MOE,
               layer_types=["sliding_attention", "full_attention"] * (L // 2),
               max_position_embeddings=131072, model_type="gpt_oss",
               num_attention_heads=nh, num_experts_per_tok=4,
               num_hidden_layers=L, num_key_value_heads=kv,
               num_local_experts=E, output_router_logits=False,
               pad_token_id=0,
               quantization_config=dict(
                   modules_to_not_convert=["model.layers.*.self_attn",
                                           "model.layers.*.mlp.router",
                                           "model.embed_tokens", "lm_head"],
                   quant_method="mxfp4"),
               rms_norm_eps=1e-5,
               rope_scaling=dict(beta_fast=32.0, beta_slow=1.0, factor=32.0,
                                 original_max_position_embeddings=4096,
                                 rope_type="yarn", truncate=False),
               rope_theta=150000, router_aux_loss_coef=0.9,
               sliding_window=128, swiglu_limit=7.0,
               tie_word_embeddings=False, use_cache=True, vocab_size=V)
    t = []
    for l in range(L):
        p = f"model.layers.{l}."
        a, m = p + "self_attn.", p + "mlp."
        t += [(p + "input_layernorm.weight", [H], "one"),
              (p + "post_attention_layernorm.weight", [H], "one"),
              (a + "q_proj.weight", [nh * d, H], "w"),
              (a + "q_proj.bias", [nh * d], "w"),
              (a + "k_proj.weight", [kv * d, H], "w"),
              (a + "k_proj.bias", [kv * d], "w"),
              (a + "v_proj.weight", [kv * d, H], "w"),
              (a + "v_proj.bias", [kv * d], "w"),
              (a + "o_proj.weight", [H, nh * d], "w"),
              (a + "o_proj.bias", [H], "w"),
              (a + "sinks", [nh], "w"),
              (m + "router.weight", [E, H], "w"),
              (m + "router.bias", [E], "w"),
              (m + "experts.gate_up_proj_blocks", [E, 2 * I_MOE, H // 32, 16],
               "u8"),
              (m + "experts.gate_up_proj_scales", [E, 2 * I_MOE, H // 32],
               "scale"),
              (m + "experts.gate_up_proj_bias", [E, 2 * I_MOE], "w"),
              (m + "experts.down_proj_blocks", [E, H, I_MOE // 32, 16], "u8"),
              (m + "experts.down_proj_scales", [E, H, I_MOE // 32], "scale"),
              (m + "experts.down_proj_bias", [E, H], "w")]
    return cfg, t


def Glu(prefix, inter):
    return [(prefix + "gate_proj.weight", [inter, H], "w"),
            (prefix + "up_proj.weight", [inter, H], "w"),
            (prefix + "down_proj.weight", [H, inter], "w")]


SIZES = {"hidden": "H", "layers": "L", "heads": "NH", "experts": "E",
         "moe_inter": "I_MOE", "vocab": "V", "dense_inter": "I_DENSE",
         "max_pos": "MAX_POS", "head_dim": "HEAD_DIM", "kv_heads": "KV_HEADS"}


def main():
    families = {"qwen3_moe": qwen3_moe, "deepseek_v3": deepseek_v3,
                "gpt_oss": gpt_oss}
    if len(sys.argv) < 3 or sys.argv[1] not in families:
        sys.exit("usage: bench/synth_moe.py " + "|".join(families) +
                 " OUT_DIR [NAME=VALUE...] (NAME: " + ", ".join(SIZES) + ")")
    ends = None
    for arg in sys.argv[3:]:
        name, _, value = arg.partition("=")
        if name == "ends" and value.isdigit():
            ends = int(value)
            continue
        if name not in SIZES or not value.isdigit() or int(value) <= 0:
            sys.exit(f"synth_moe: {arg}: expected NAME=POSITIVE_INT with NAME "
                     "one of " + ", ".join(SIZES) + ", or ends=ID")
        globals()[SIZES[name]] = int(value)
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    cfg, layers = families[sys.argv[1]]()
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    tensors = ([("model.embed_tokens.weight", [V, H], "w")] + layers +
               [("model.norm.weight", [H], "one"),
                ("lm_head.weight", [V, H], "w")])
    random.seed(0)
    block = b"".join(struct.pack("<f", random.gauss(0, 0.02))[2:4]
                     for _ in range(1 << 15))  # 64 KB of bf16
    header, off = {"__metadata__": {"format": "pt"}}, 0
    sizes = []
    dtypes = {"f32zero": ("F32", 4), "u8": ("U8", 1), "scale": ("U8", 1)}
    for name, shape, kind in tensors:
        dtype, n = dtypes.get(kind, ("BF16", 2))
        for s in shape:
            n *= s
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [off, off + n]}
        sizes.append(n)
        off += n
    hb = json.dumps(header).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        k = 0
        for (name, shape, kind), n in zip(tensors, sizes):
            if kind == "one":
                f.write(struct.pack("<f", 1.0)[2:4] * (n // 2))
            elif kind == "f32zero":
                f.write(bytes(n))
            elif kind == "scale":
                f.write(bytes([119]) * n)
            else:
                while n > 0:
                    chunk = block[k:k + n]
                    f.write(chunk)
                    n -= len(chunk)
                    k = (k + len(chunk)) % len(block)
    if ends is not None:
        Ends(os.path.join(out, "model.safetensors"), 8 + len(hb), header, ends)
    print(f"{sys.argv[1]}: {off} bytes of tensors in {out}")


def Ends(path, base, header, eos):
    """Patches the model to answer token `eos` at once (see the top)."""
    def bf16(x):
        return struct.pack("<f", x)[2:4]
    def at(name, index):
        return base + header[name]["data_offsets"][0] + 2 * index
    if not 0 <= eos < V:
        sys.exit(f"synth_moe: ends={eos} is outside the vocabulary of {V}")
    with open(path, "r+b") as f:
        for row in range(V):
            f.seek(at("model.embed_tokens.weight", row * H))
            f.write(bf16(4.0))
        f.seek(at("model.norm.weight", 0))
        f.write(bf16(1.0) + bytes(2 * (H - 1)))
        f.seek(at("lm_head.weight", eos * H))
        f.write(bf16(10.0))


main()

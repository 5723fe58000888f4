#!/usr/bin/env python3
# A synthetic Qwen3-MoE checkpoint in the Hugging Face layout (config.json +
# one model.safetensors, random bf16 weights, norms at 1.0) for batch and
# kernel benchmarks of a family flotilla-tool synth does not make (it makes
# Kimi K3 only). Standard library only; the weights repeat one 64 KB block
# of N(0, 0.02) values, so a 1.4 GB model is written in seconds. Not a
# trained model: its text is noise, its routing arbitrary.
#
#   bench/synth_qwen3_moe.py OUT_DIR
#   build/bin/flotilla-tool pack --model OUT_DIR
#   build/bin/flotilla-bench-batch --model OUT_DIR --mem 4G --batches 1,8
#
# Shape: hidden 2048, 8 layers, 16 heads (4 KV) of 128, 16 experts (top 4)
# of 768, vocab 8192: 1.44 GB.
import json, os, random, struct, sys
if len(sys.argv) != 2:
    sys.exit("usage: bench/synth_qwen3_moe.py OUT_DIR")
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
cfg = dict(architectures=["Qwen3MoeForCausalLM"], attention_bias=False, bos_token_id=0,
           eos_token_id=1, head_dim=128, hidden_act="silu", hidden_size=2048,
           intermediate_size=6144, max_position_embeddings=4096, model_type="qwen3_moe",
           moe_intermediate_size=768, norm_topk_prob=True, num_attention_heads=16,
           num_experts=16, num_experts_per_tok=4, num_hidden_layers=8,
           num_key_value_heads=4, rms_norm_eps=1e-6, rope_scaling=None,
           rope_theta=1000000.0, sliding_window=None, tie_word_embeddings=False,
           torch_dtype="bfloat16", use_sliding_window=False, vocab_size=8192,
           decoder_sparse_step=1, mlp_only_layers=[])
json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
H, D, NH, KV, E, I, V, L = 2048, 128, 16, 4, 16, 768, 8192, 8
random.seed(0)
def bf16(x): return struct.pack("<f", x)[2:4]
block = b"".join(bf16(random.gauss(0, 0.02)) for _ in range(1 << 15))  # 64 KB
ones = bf16(1.0)
tensors = []
def add(name, shape, norm=False): tensors.append((name, shape, norm))
add("model.embed_tokens.weight", [V, H])
for l in range(L):
    p = f"model.layers.{l}."
    add(p + "input_layernorm.weight", [H], True)
    add(p + "post_attention_layernorm.weight", [H], True)
    add(p + "self_attn.q_proj.weight", [NH * D, H])
    add(p + "self_attn.k_proj.weight", [KV * D, H])
    add(p + "self_attn.v_proj.weight", [KV * D, H])
    add(p + "self_attn.o_proj.weight", [H, NH * D])
    add(p + "self_attn.q_norm.weight", [D], True)
    add(p + "self_attn.k_norm.weight", [D], True)
    add(p + "mlp.gate.weight", [E, H])
    for e in range(E):
        add(p + f"mlp.experts.{e}.gate_proj.weight", [I, H])
        add(p + f"mlp.experts.{e}.up_proj.weight", [I, H])
        add(p + f"mlp.experts.{e}.down_proj.weight", [H, I])
add("model.norm.weight", [H], True)
add("lm_head.weight", [V, H])
header, off = {"__metadata__": {"format": "pt"}}, 0
for name, shape, _ in tensors:
    n = 2
    for s in shape: n *= s
    header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + n]}
    off += n
hb = json.dumps(header).encode()
hb += b" " * ((8 - len(hb) % 8) % 8)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(hb))); f.write(hb)
    k = 0
    for name, shape, norm in tensors:
        n = 2
        for s in shape: n *= s
        if norm: f.write(ones * (n // 2)); continue
        while n > 0:
            chunk = block[k % len(block):] [:n]
            if not chunk: k = 0; continue
            f.write(chunk); n -= len(chunk); k += len(chunk)
print("bytes", off)

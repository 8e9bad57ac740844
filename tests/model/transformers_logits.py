"""Logits of transformers' own model for a checkpoint (the `reference` tests).

usage: transformers_logits.py CHECKPOINT_DIR TOKEN,TOKEN,... OUT.f32 [SCALE_DTYPE]
Writes [n tokens, vocab] float32 logits of one forward in float32, eager
attention, no cache. SCALE_DTYPE (bfloat16, float16): the scaled embeddings'
factors cast to that dtype, as a run in the checkpoint's own dtype casts them
(`embed_scale.to(self.weight.dtype)`), everything else in float32.
"""
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32,
                                             attn_implementation="eager")
model.eval()
if len(sys.argv) > 4:
    dtype = getattr(torch, sys.argv[4])
    for module in model.modules():
        scale = getattr(module, "embed_scale", None)
        if isinstance(scale, torch.Tensor):
            module.embed_scale = scale.to(dtype).to(torch.float32)
ids = torch.tensor([[int(t) for t in sys.argv[2].split(",")]])
with torch.no_grad():
    logits = model(input_ids=ids, use_cache=False).logits[0]
np.ascontiguousarray(logits.float().numpy(), dtype=np.float32).tofile(sys.argv[3])

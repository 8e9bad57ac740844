"""transformers' own Gemma 4 assistant on the inputs mtpspec gives it (the
`reference` tests; the venv of scripts/install-reference.sh).

usage: assistant_transformers.py TARGET_DIR ASSISTANT_DIR TOKENS N0 STEPS OUT.json
  The target (AutoModelForCausalLM, float32, eager attention, no cache)
  forwards tokens[0 .. len-2] once, returning its hidden states and the
  shared K/V of its last K/V-owning layer of each kind. For every committed
  length N in N0..len(TOKENS), the assistant (Gemma4AssistantForCausalLM)
  runs STEPS forwards at position N-1: step 1 on [the target's embedding of
  tokens[N-1]; its last hidden state at N-2], each later step on its own
  argmax and projected state, with the target's K/V of positions < N-1 —
  what transformers' candidate generator passes right after a prefill.
  Writes {"chains": [[{"token", "logits" (the whole vocabulary: masked
  tokens at transformers' mask value)}, ...], ...]}.
"""
import json
import sys

import torch
from transformers import AutoModelForCausalLM


def main():
    tdir, adir, toks, n0, steps, out = sys.argv[1:7]
    toks = [int(t) for t in toks.split(",")]
    n0, steps = int(n0), int(steps)
    target = AutoModelForCausalLM.from_pretrained(tdir, dtype=torch.float32,
                                                  attn_implementation="eager").eval()
    assistant = AutoModelForCausalLM.from_pretrained(adir, dtype=torch.float32,
                                                     attn_implementation="eager").eval()
    embed = target.get_input_embeddings()
    chains = []
    with torch.no_grad():
        o = target(input_ids=torch.tensor([toks[:-1]]), use_cache=False,
                   output_hidden_states=True, return_shared_kv_states=True)
        hidden = o.hidden_states[-1]
        for N in range(n0, len(toks) + 1):
            kv = {k: (v[0][:, :, :N - 1], v[1][:, :, :N - 1]) for k, v in o.shared_kv_states.items()}
            state = hidden[:, N - 2:N - 1]
            tok = torch.tensor([[toks[N - 1]]])
            chain = []
            for _ in range(steps):
                e = torch.cat([embed(tok), state], dim=-1)
                a = assistant(inputs_embeds=e, position_ids=torch.tensor([[N - 1]]),
                              shared_kv_states=kv, use_cache=False)
                logits = a.logits[0, -1]
                tok = logits.argmax().reshape(1, 1)
                state = a.last_hidden_state
                chain.append({"token": int(tok), "logits": [float(x) for x in logits]})
            chains.append(chain)
    with open(out, "w") as f:
        json.dump({"chains": chains}, f)


main()

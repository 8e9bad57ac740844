"""Hugging Face `tokenizers` on a tokenizer.json, for tests/io/gemma4_hf_tokenizer_test.cc.

Usage: hf_tokenize.py TOKENIZER_JSON TEXTS_JSON
Prints a JSON list with, per text of TEXTS_JSON (a list of strings): the ids
without ("plain") and with ("special") the post-processor's special tokens,
and the decoding of the plain ids ("decoded").
"""
import json
import sys

from tokenizers import Tokenizer


def main() -> None:
    tok = Tokenizer.from_file(sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as f:
        texts = json.load(f)
    out = []
    for t in texts:
        plain = tok.encode(t, add_special_tokens=False).ids
        out.append({"plain": plain,
                    "special": tok.encode(t, add_special_tokens=True).ids,
                    "decoded": tok.decode(plain, skip_special_tokens=False)})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

"""Encodes texts with Hugging Face's `tokenizers` library: the reference for
tests/io/qwen35_tokenizer_test.cc.

  python tokenizers_encode.py TOKENIZER_JSON TEXTS_JSON
      prints {"version": ..., "ids": [[...], ...]}: each text of the JSON
      array TEXTS_JSON encoded without special tokens.
"""
import json
import sys

import tokenizers


def main():
    tok = tokenizers.Tokenizer.from_file(sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as f:
        texts = json.load(f)
    ids = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    print(json.dumps({"version": tokenizers.__version__, "ids": ids}))


if __name__ == "__main__":
    main()

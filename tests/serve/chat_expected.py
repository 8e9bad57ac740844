"""Renders the chat cases of gemma4_chat_expected.json with Gemma 4's published
chat template, as transformers' apply_chat_template(tokenize=False,
add_generation_prompt=True) does: the reference that
tests/serve/gemma4_chat_test.cc compares our own rendering with.

  python gemma4_chat_expected.py TEMPLATE CASES_JSON --write
      fills each case's "expected" and the "reference" block in CASES_JSON
      (run it with a Python that has transformers, e.g. /work/venv-ref, on
      llama.cpp's models/templates/google-gemma-4-31B-it.jinja, which
      bench/real-models.sh --install puts in the `real` venv's models/);
  python gemma4_chat_expected.py TEMPLATE CASES_JSON --out OUT_JSON
      writes the same document to OUT_JSON (the test's live check).

Without transformers the template is rendered by jinja2 in the environment
transformers builds (sandboxed, trim_blocks, lstrip_blocks, loopcontrols).
As OpenAI-compatible servers do (vLLM, llama.cpp), a tool call's arguments
given as JSON text are parsed to an object before rendering, and, as
apply_chat_template does, message keys whose value is null are dropped.
"""
import argparse
import hashlib
import json
import os


def renderer():
    try:
        import transformers
        from transformers.utils.chat_template_utils import render_jinja_template
    except ImportError:
        import jinja2
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=[jinja2.ext.loopcontrols])

        def render(template, messages, tools, **kw):
            return env.from_string(template).render(messages=messages, tools=tools, **kw)

        return render, "jinja2 " + jinja2.__version__

    def render(template, messages, tools, **kw):
        out, _ = render_jinja_template(conversations=[messages], tools=tools,
                                       chat_template=template, **kw)
        return out[0]

    return render, "transformers " + transformers.__version__ + " render_jinja_template"


def server_messages(messages):
    out = []
    for m in messages:
        m = {k: v for k, v in m.items() if v is not None}
        for call in m.get("tool_calls", []):
            args = call["function"].get("arguments")
            if isinstance(args, str):
                call["function"]["arguments"] = json.loads(args)
        out.append(m)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("template")
    ap.add_argument("cases")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true")
    g.add_argument("--out")
    a = ap.parse_args()
    with open(a.template, encoding="utf-8") as f:
        template = f.read()
    with open(a.cases, encoding="utf-8") as f:
        doc = json.load(f)
    render, by = renderer()
    for c in doc["cases"]:
        kw = dict(add_generation_prompt=True, bos_token="<bos>", eos_token="<eos>")
        if c["thinking"]:
            kw["enable_thinking"] = True
        c["expected"] = render(template, server_messages(c["messages"]), c["tools"] or None, **kw)
    doc["reference"] = {
        "renderer": by,
        "template": os.path.basename(a.template),
        "template_sha256": hashlib.sha256(template.encode("utf-8")).hexdigest(),
    }
    with open(a.cases if a.write else a.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()

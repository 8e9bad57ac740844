"""Renders the chat cases of a *_chat_expected.json file with a model's
published chat template, as transformers' apply_chat_template(tokenize=False,
add_generation_prompt=True) does: the reference that the serve tests
(gemma4_chat_test.cc, qwen35_chat_test.cc) compare our own rendering with.

  python chat_expected.py TEMPLATE CASES_JSON --write
      fills each case's "expected" and the "reference" block in CASES_JSON
      (run it with a Python that has transformers, e.g. /work/venv-ref, on
      the template from llama.cpp's models/templates/ that
      bench/real-models.sh --install puts in the `real` venv's models/:
      google-gemma-4-31B-it.jinja, Qwen3.5-4B.jinja);
  python chat_expected.py TEMPLATE CASES_JSON --out OUT_JSON
      writes the same document to OUT_JSON (the tests' live check).

A case's "thinking" (true or false) is passed as enable_thinking; null leaves
it undefined (the template's default). The document's "bos_token" and
"eos_token" (default "<bos>", "<eos>") are passed as such.
Without transformers the template is rendered by jinja2 in the environment
transformers builds (sandboxed, trim_blocks, lstrip_blocks, loopcontrols,
its tojson).
As OpenAI-compatible servers do (vLLM, llama.cpp), a tool call's arguments
given as JSON text are parsed to an object before rendering, and, as
apply_chat_template does, message keys whose value is null are dropped; a
"developer" message is a system message, as our API reads it.
"""
import argparse
import copy
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
        env.filters["tojson"] = lambda x, ensure_ascii=False, indent=None, separators=None, \
            sort_keys=False: json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                                        separators=separators, sort_keys=sort_keys)

        def raise_exception(message):
            raise jinja2.exceptions.TemplateError(message)

        env.globals["raise_exception"] = raise_exception

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
        m = {k: v for k, v in copy.deepcopy(m).items() if v is not None}
        if "reasoning" in m and "reasoning_content" not in m:  # vLLM's name, as transformers reads it
            m["reasoning_content"] = m.pop("reasoning")
        if m.get("role") == "developer":  # OpenAI's newer name, read as system by our API
            m["role"] = "system"
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
        kw = dict(add_generation_prompt=True, bos_token=doc.get("bos_token", "<bos>"),
                  eos_token=doc.get("eos_token", "<eos>"))
        if c.get("thinking") is not None:
            kw["enable_thinking"] = c["thinking"]
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

"""The openai PyPI package as a client of `mtpspec serve` (run.sh starts it):
completions and chat completions, streamed and not, usage, models, errors.
Usage: openai_test.py PORT KEY"""
import sys

import openai
from openai import OpenAI

port, key = sys.argv[1], sys.argv[2]
base = f"http://127.0.0.1:{port}/v1"
client = OpenAI(base_url=base, api_key=key, max_retries=0)
settings = dict(model="gpt-4o-mini", max_tokens=40, temperature=0)

models = client.models.list()
assert len(models.data) == 1, models
served = models.data[0].id

# Completions.
c = client.completions.create(**settings, prompt="Once upon a time")
assert c.object == "text_completion", c.object
assert c.model == served, "another model's name is served by ours"
assert len(c.choices[0].text) > 0
assert c.usage.total_tokens == c.usage.prompt_tokens + c.usage.completion_tokens
assert 0 < c.usage.completion_tokens <= 40
streamed, usage = "", None
for chunk in client.completions.create(**settings, prompt="Once upon a time", stream=True,
                                       stream_options={"include_usage": True}):
    if chunk.choices:
        streamed += chunk.choices[0].text or ""
    if chunk.usage:
        usage = chunk.usage
assert streamed == c.choices[0].text, "streamed text != non-streamed text"
assert usage == c.usage, (usage, c.usage)

# Chat completions.
msgs = [{"role": "system", "content": "Tell stories."}, {"role": "user", "content": "A dog"}]
chat_settings = dict(settings, temperature=0.8)
chat = client.chat.completions.create(**chat_settings, messages=msgs, seed=3)
assert chat.object == "chat.completion", chat.object
assert chat.choices[0].message.role == "assistant"
assert len(chat.choices[0].message.content) > 0
chat_streamed, role = "", None
for chunk in client.chat.completions.create(**chat_settings, messages=msgs, seed=3, stream=True):
    d = chunk.choices[0].delta if chunk.choices else None
    if d is None:
        continue
    role = d.role or role
    chat_streamed += d.content or ""
assert role == "assistant", role
assert chat_streamed == chat.choices[0].message.content, "seeded chat: streamed != plain"


def rejects(call, error, param=None):
    try:
        call()
    except error as e:
        assert param is None or e.param == param, (e.param, param)
        return
    raise AssertionError(f"no {error.__name__}")


# Errors: typed by the client from our status and OpenAI-shaped body.
rejects(lambda: client.completions.create(**settings, prompt="x", n=2), openai.BadRequestError, "n")
rejects(lambda: client.completions.create(**dict(settings, temperature="hot"), prompt="x"),
        openai.BadRequestError, "temperature")
wrong = OpenAI(base_url=base, api_key="nope", max_retries=0)
rejects(lambda: wrong.models.list(), openai.AuthenticationError)
print(f"openai client {openai.__version__}: ok ({c.usage.completion_tokens} + "
      f"{chat.usage.completion_tokens} tokens)")

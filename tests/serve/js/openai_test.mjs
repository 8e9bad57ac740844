// The openai npm package as a client of `mtpspec serve` (run.sh starts it):
// completions and chat completions, streamed and not, usage, models, errors.
import OpenAI from "openai";
import assert from "node:assert/strict";

const [port, key] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: key, maxRetries: 0 });
const settings = { model: "gpt-4o-mini", max_tokens: 40, temperature: 0 };

const models = await client.models.list();
assert.equal(models.data.length, 1);
const served = models.data[0].id;

// Completions.
const c = await client.completions.create({ ...settings, prompt: "Once upon a time" });
assert.equal(c.object, "text_completion");
assert.equal(c.model, served, "another model's name is served by ours");
assert.ok(c.choices[0].text.length > 0);
assert.equal(c.usage.total_tokens, c.usage.prompt_tokens + c.usage.completion_tokens);
assert.ok(c.usage.completion_tokens > 0 && c.usage.completion_tokens <= 40);
let streamed = "";
let usage = null;
const s = await client.completions.create({ ...settings, prompt: "Once upon a time", stream: true,
                                            stream_options: { include_usage: true } });
for await (const chunk of s) {
  if (chunk.choices.length) streamed += chunk.choices[0].text ?? "";
  if (chunk.usage) usage = chunk.usage;
}
assert.equal(streamed, c.choices[0].text, "streamed text != non-streamed text");
assert.deepEqual(usage, c.usage);

// Chat completions.
const msgs = [{ role: "system", content: "Tell stories." }, { role: "user", content: "A dog" }];
const chat = await client.chat.completions.create({ ...settings, messages: msgs, seed: 3,
                                                    temperature: 0.8 });
assert.equal(chat.object, "chat.completion");
assert.equal(chat.choices[0].message.role, "assistant");
assert.ok(chat.choices[0].message.content.length > 0);
let chatStreamed = "";
let role = null;
const cs = await client.chat.completions.create({ ...settings, messages: msgs, seed: 3,
                                                  temperature: 0.8, stream: true });
for await (const chunk of cs) {
  const d = chunk.choices[0]?.delta ?? {};
  if (d.role) role = d.role;
  chatStreamed += d.content ?? "";
}
assert.equal(role, "assistant");
assert.equal(chatStreamed, chat.choices[0].message.content, "seeded chat: streamed != plain");

// Errors: typed by the client from our status and OpenAI-shaped body.
await assert.rejects(client.completions.create({ ...settings, prompt: "x", n: 2 }),
                     (e) => e instanceof OpenAI.BadRequestError && e.param === "n");
await assert.rejects(client.completions.create({ ...settings, prompt: "x", temperature: "hot" }),
                     (e) => e instanceof OpenAI.BadRequestError && e.param === "temperature");
const wrong = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "nope", maxRetries: 0 });
await assert.rejects(wrong.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
console.log("openai client: ok (" + c.usage.completion_tokens + " + " +
            chat.usage.completion_tokens + " tokens)");

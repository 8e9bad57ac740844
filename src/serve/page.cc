// The page's source. Element ids (prompt, go, out, toks, rate, accept, ...)
// are what tests/serve/page_test.mjs drives; keep them stable.
#include "serve/page.h"

namespace mtp::serve {

const char* page_html() {
  return R"PAGE(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>mtpspec</title>
<style>
body { font: 15px/1.5 system-ui, sans-serif; max-width: 60em; margin: 2em auto; padding: 0 1em; }
textarea { width: 100%; height: 6em; font: inherit; }
#out { white-space: pre-wrap; border: 1px solid #ccc; padding: .8em; min-height: 8em;
       font-family: ui-monospace, monospace; }
.controls { display: flex; flex-wrap: wrap; gap: 1em; align-items: center; margin: .6em 0; }
.t-target { background: #eee; }
.t-mtp0 { background: #b7e4c7; } .t-mtp1 { background: #95d5b2; }
.t-mtp2 { background: #74c69d; } .t-mtp3 { background: #52b788; }
.t-mtpN { background: #40916c; color: #fff; }
.t-lookup { background: #ffd6a5; }
.legend span { padding: 0 .4em; margin-right: .4em; }
#stats { color: #333; margin: .5em 0; }
#error { color: #b00020; }
</style>
</head>
<body>
<h1>mtpspec</h1>
<p>Each token is coloured by who produced it: the target model itself, or a draft that the
target verified (MTP module k, or a lookup). The text is exactly what the target alone gives.</p>
<textarea id="prompt" placeholder="Prompt">Once upon a time</textarea>
<div class="controls">
  <label><input type="radio" name="mode" value="completion" checked> completion</label>
  <label><input type="radio" name="mode" value="chat"> chat</label>
  <label>max tokens <input id="max" type="number" value="128" min="1" style="width:6em"></label>
  <label>temperature <input id="temp" type="number" value="0" min="0" max="2" step="0.1"
    style="width:5em"></label>
  <label><input id="drafter" type="checkbox" checked> drafter</label>
  <label>API key <input id="key" type="password" style="width:10em"></label>
  <button id="go">Generate</button> <button id="stop" disabled>Stop</button>
</div>
<div class="legend"><span class="t-target">target</span><span class="t-mtp0">MTP 0</span><span
  class="t-mtp1">MTP 1</span><span class="t-mtp2">MTP 2</span><span class="t-mtp3">MTP 3</span><span
  class="t-lookup">lookup</span></div>
<div id="stats">tokens: <span id="toks">0</span> | <span id="rate">0.0</span> tok/s |
  drafted: <span id="drafted">0</span> | acceptance: <span id="accept">-</span></div>
<div id="out"></div>
<div id="error"></div>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let controller = null;

function originClass(o) {
  if (o === "target") return "t-target";
  const m = /^mtp(\d+)$/.exec(o);
  if (m) return Number(m[1]) < 4 ? "t-mtp" + m[1] : "t-mtpN";
  return "t-lookup";
}

function showAcceptance(stats) {
  if (!stats || !stats.acceptance) return;
  $("accept").textContent = stats.acceptance.map((a, k) => k + ": " + a.toFixed(2)).join(", ");
}

async function generate() {
  const chat = document.querySelector("input[name=mode]:checked").value === "chat";
  const body = { stream: true, max_tokens: Number($("max").value),
                 temperature: Number($("temp").value), drafter: $("drafter").checked,
                 stream_options: { include_usage: true } };
  if (chat) body.messages = [{ role: "user", content: $("prompt").value }];
  else body.prompt = $("prompt").value;
  const headers = { "Content-Type": "application/json" };
  if ($("key").value) headers.Authorization = "Bearer " + $("key").value;
  $("out").textContent = ""; $("error").textContent = ""; $("accept").textContent = "-";
  $("go").disabled = true; $("stop").disabled = false;
  let n = 0, drafted = 0, first = 0;
  controller = new AbortController();
  try {
    const res = await fetch(chat ? "/v1/chat/completions" : "/v1/completions",
                            { method: "POST", headers, body: JSON.stringify(body),
                              signal: controller.signal });
    if (!res.ok) {
      const j = await res.json().catch(() => ({}));
      throw new Error(res.status + ": " + ((j.error && j.error.message) || res.statusText));
    }
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const line = buf.slice(0, i); buf = buf.slice(i + 2);
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") continue;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message);
        const x = j.mtpspec || {};
        for (const t of x.tokens || []) {
          n++;
          if (t.origin !== "target") drafted++;
          if (!first) first = performance.now();
          if (t.text) {
            const s = document.createElement("span");
            s.className = originClass(t.origin);
            s.dataset.origin = t.origin;
            s.textContent = t.text;
            $("out").appendChild(s);
          }
        }
        const secs = (performance.now() - first) / 1000;
        $("toks").textContent = n;
        $("drafted").textContent = drafted;
        $("rate").textContent = n > 1 && secs > 0 ? ((n - 1) / secs).toFixed(1) : "0.0";
        if (x.stats) showAcceptance(x.stats);
        if (x.timings) $("rate").textContent = x.timings.generation_tok_s.toFixed(1);
      }
    }
  } catch (e) {
    if (e.name !== "AbortError") $("error").textContent = String(e.message || e);
  } finally {
    $("go").disabled = false; $("stop").disabled = true; controller = null;
    document.body.dataset.done = "1";
  }
}

$("go").addEventListener("click", () => { document.body.dataset.done = ""; generate(); });
$("stop").addEventListener("click", () => { if (controller) controller.abort(); });
</script>
</body>
</html>
)PAGE";
}

}  // namespace mtp::serve

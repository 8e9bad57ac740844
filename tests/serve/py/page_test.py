"""The page at / in headless Debian chromium, driven by the playwright PyPI
package (no browser of its own): it streams a completion, colours each token
by its origin, shows tok/s and acceptance, and loads nothing from anywhere
but the server. Usage: page_test.py PORT KEY CHROMIUM"""
import json
import re
import sys
import urllib.request

from playwright.sync_api import sync_playwright

port, key, chromium = sys.argv[1], sys.argv[2], sys.argv[3]
base = f"http://127.0.0.1:{port}"

with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--headless=new"])
    try:
        page = browser.new_page()
        foreign, errors = [], []
        page.on("request", lambda r: None if r.url.startswith(base) else foreign.append(r.url))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(base + "/")
        page.fill("#key", key)
        page.fill("#prompt", "Once upon a time")
        page.fill("#max", "60")
        page.fill("#temp", "0")
        page.click("#go")
        page.wait_for_function("() => document.body.dataset.done === '1'", timeout=60000)
        assert page.text_content("#error") == "", "the page reported an error"
        spans = page.eval_on_selector_all(
            "#out span",
            "els => els.map(e => ({origin: e.dataset.origin, cls: e.className, text: e.textContent}))")
        assert spans, "no tokens shown"
        for s in spans:
            o = s["origin"]
            want = ("t-target" if o == "target" else
                    "t-" + o if re.fullmatch(r"mtp[0-3]", o) else
                    "t-mtpN" if re.fullmatch(r"mtp\d+", o) else "t-lookup")
            assert s["cls"] == want, f"origin {o} coloured {s['cls']}"
        # The same request through the API: the page shows exactly its text.
        req = urllib.request.Request(
            base + "/v1/completions", method="POST",
            headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"},
            data=json.dumps({"prompt": "Once upon a time", "max_tokens": 60,
                             "temperature": 0}).encode())
        j = json.load(urllib.request.urlopen(req))
        assert "".join(s["text"] for s in spans) == j["choices"][0]["text"]
        assert int(page.text_content("#toks")) == j["usage"]["completion_tokens"]
        assert float(page.text_content("#rate")) > 0, "no tok/s shown"
        assert re.fullmatch(r"0: \d\.\d\d, 1: \d\.\d\d, 2: \d\.\d\d", page.text_content("#accept"))
        # Origins this random drafter may not produce: the page's mapping itself.
        classes = page.evaluate(
            "() => ['target', 'mtp0', 'mtp1', 'mtp3', 'mtp7', 'prompt', 'history'].map(originClass)")
        assert classes == ["t-target", "t-mtp0", "t-mtp1", "t-mtp3", "t-mtpN", "t-lookup",
                           "t-lookup"], classes
        assert foreign == [], f"the page loaded foreign resources: {foreign}"
        assert errors == [], errors
        origins = ",".join(sorted({s["origin"] for s in spans}))
        print(f"page: ok ({len(spans)} coloured pieces, origins {origins})")
    finally:
        browser.close()

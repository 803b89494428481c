"""`/schema` in real Chromium: Swagger UI renders the API's operations from assets the app
serves itself, under the app's CSP, with no request leaving loopback."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

TOKEN = "schema-token-7d2e41b9"


def test_schema_renders_offline_behind_the_token(browser, live_server):
    server = live_server(token=TOKEN)
    with httpx.Client(base_url=server.url, timeout=5) as client:
        for path in ("/schema", "/schema/openapi.json", "/schema/assets/swagger-ui-bundle.js"):
            assert client.get(path).status_code == 401, path
            assert client.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.get("/schema/assets/index.html", headers=_auth()).status_code == 404

    context = browser.new_context(extra_http_headers=_auth())
    page = context.new_page()
    requests: list[str] = []
    console: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: console.append(m.text))
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        answer = page.goto(f"{server.url}/schema")
        assert answer.status == 200
        assert "script-src 'self'" in answer.headers["content-security-policy"]
        page.wait_for_selector(".opblock-summary-path", timeout=30_000)
        paths = page.locator(".opblock-summary-path").all_inner_texts()
        summaries = page.locator(".opblock-summary-description").all_inner_texts()
        title = page.locator(".info .title").inner_text()
    finally:
        context.close()

    assert "/api/missions" in [p.replace("\u200b", "") for p in paths]
    assert "/metrics" in [p.replace("\u200b", "") for p in paths]
    assert "List missions" in summaries
    assert title.startswith("Loopwright")
    assert errors == []
    assert not [m for m in console if "Content Security Policy" in m], console
    hosts = {urlsplit(url).hostname for url in requests if not url.startswith("data:")}
    assert hosts == {"127.0.0.1"}, requests
    assert f"{server.url}/schema/openapi.json" in requests


def _auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}

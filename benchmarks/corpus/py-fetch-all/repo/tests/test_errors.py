import asyncio

from crawler.fetch import broken_links, fetch_all


async def transport(url):
    if url == "/hang":
        await asyncio.sleep(1)
    if url == "/refused":
        raise ConnectionRefusedError("connection refused")
    return (404 if url == "/gone" else 200), ""


def test_broken_links_are_reported():
    results = asyncio.run(fetch_all(transport, ["/ok", "/refused", "/hang"], timeout=0.05))
    assert set(broken_links(results)) == {"/refused", "/hang"}
    assert any("timed out" in (r.error or "") for r in results)


def test_http_errors_are_broken():
    results = asyncio.run(fetch_all(transport, ["/gone"]))
    assert broken_links(results) == ["/gone"]

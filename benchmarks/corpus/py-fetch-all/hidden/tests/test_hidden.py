import asyncio

from crawler.fetch import fetch_all


def test_order_kept_with_a_small_limit():
    delays = [0.03, 0.0, 0.02, 0.01, 0.0, 0.025]
    urls = [f"/page/{i}" for i in range(len(delays))]

    async def transport(url):
        await asyncio.sleep(delays[int(url.rsplit("/", 1)[1])])
        return 200, url

    results = asyncio.run(fetch_all(transport, urls, limit=2))
    assert [r.body for r in results] == urls


def test_order_kept_when_some_fail():
    async def transport(url):
        if url == "/b":
            raise OSError("reset")
        await asyncio.sleep(0.02 if url == "/a" else 0)
        return 200, url

    results = asyncio.run(fetch_all(transport, ["/a", "/b", "/c"]))
    assert [r.url for r in results] == ["/a", "/b", "/c"]
    assert [r.ok for r in results] == [True, False, True]


def test_limit_still_applies():
    running = 0
    peak = 0

    async def transport(url):
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return 200, url

    asyncio.run(fetch_all(transport, [f"/{i}" for i in range(9)], limit=3))
    assert peak == 3

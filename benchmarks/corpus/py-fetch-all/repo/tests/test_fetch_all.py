import asyncio

from crawler.fetch import fetch_all

DELAYS = {"/slow": 0.05, "/medium": 0.02, "/fast": 0.0}


async def transport(url):
    await asyncio.sleep(DELAYS[url])
    return 200, f"body of {url}"


def test_results_follow_the_order_of_urls():
    results = asyncio.run(fetch_all(transport, ["/slow", "/medium", "/fast"]))
    assert [r.url for r in results] == ["/slow", "/medium", "/fast"]
    assert results[0].body == "body of /slow"

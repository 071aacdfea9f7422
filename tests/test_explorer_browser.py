"""The attention explorer in a real browser (Debian's Chromium driven by Playwright, as
tests/test_browser.py does): offline, clicking and hovering a token changes what is shown, the
layer and head buttons switch the map, and the widget follows a dark colour scheme; on the built
site's page of notebook 04 as well as in a page of its own."""

from __future__ import annotations

import pytest
import torch

from lectures_lib.explorer import AttentionExplorer, AttentionView

from .browser_helpers import only_local, require_playwright

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)

sync_api = require_playwright()


def _offline_page(browser, **options):
    page = browser.new_page(**options)
    refused = []
    only_local(page, refused)
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    return page, refused, errors


def _key_colours(root):
    return root.locator(".ae-keys .ae-tok").evaluate_all(
        "tokens => tokens.map(t => getComputedStyle(t).backgroundColor)"
    )


def _explorer_page(tmp_path):
    maps = torch.zeros(2, 2, 3, 3)
    maps[..., 0, :] = torch.tensor([0.8, 0.1, 0.1])  # query 0 looks at key 0
    maps[..., 1, :] = torch.tensor([0.1, 0.1, 0.8])  # query 1 looks at key 2
    maps[..., 2, :] = torch.tensor([1 / 3, 1 / 3, 1 / 3])
    maps[1, 1] = maps[1, 1].flip(-1)  # layer 1, head 1 looks the other way
    cross = torch.full((2, 2, 2, 3), 1 / 3)
    explorer = AttentionExplorer([
        AttentionView("self", maps, ["a", "b", "c"]),
        AttentionView("cross", cross, ["x", "y"], ["a", "b", "c"]),
    ])
    path = tmp_path / "explorer.html"
    path.write_text(explorer.to_html(full_page=True), encoding="utf-8")
    return path


def test_clicking_a_token_changes_the_view(browser, tmp_path):
    page, refused, errors = _offline_page(browser)
    page.goto(_explorer_page(tmp_path).as_uri())
    root = page.locator(".ae-root")
    sync_api.expect(root).to_have_attribute("data-state", "0,0,0,0")  # the script ran
    before = _key_colours(root)
    caption = root.locator(".ae-caption").inner_text()
    assert "“a” attends most to “a” (0.80)" in caption
    root.locator(".ae-queries .ae-tok", has_text="b").click()
    sync_api.expect(root).to_have_attribute("data-state", "0,0,0,1")
    after = _key_colours(root)
    assert after != before and after[2] == before[0], "key 2 now has the colour key 0 had"
    assert "“b” attends most to “c” (0.80)" in root.locator(".ae-caption").inner_text()

    root.locator(".ae-queries .ae-tok", has_text="a").hover()  # hover shows, click keeps
    sync_api.expect(root).to_have_attribute("data-state", "0,0,0,0")
    page.mouse.move(0, 0)
    sync_api.expect(root).to_have_attribute("data-state", "0,0,0,1")

    root.locator(".ae-layers button", has_text="1").click()
    root.locator(".ae-heads button", has_text="1").click()
    sync_api.expect(root).to_have_attribute("data-state", "0,1,1,1")  # the clicked query stays
    assert "“b” attends most to “a” (0.80)" in root.locator(".ae-caption").inner_text()

    root.locator(".ae-views button", has_text="cross").click()
    sync_api.expect(root).to_have_attribute("data-state", "1,0,0,0")
    assert root.locator(".ae-queries .ae-tok").all_inner_texts() == ["x", "y"]
    assert not refused and not errors, (refused, errors)
    page.close()


def test_the_widget_follows_a_dark_colour_scheme(browser, tmp_path):
    path = _explorer_page(tmp_path)
    backgrounds = {}
    for scheme in ("light", "dark"):
        page, _, _ = _offline_page(browser, color_scheme=scheme)
        page.goto(path.as_uri())
        backgrounds[scheme] = page.locator(".ae-root").evaluate(
            "e => getComputedStyle(e).backgroundColor"
        )
        page.close()
    assert backgrounds["light"] == "rgb(250, 250, 250)"
    assert backgrounds["dark"] == "rgb(30, 30, 30)"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from course_tools.publish.site import build_site

    out = tmp_path_factory.mktemp("site")
    return out, build_site(out)


def test_the_explorer_works_on_the_built_site_page_of_04(browser, site):
    out, _ = site
    page, refused, errors = _offline_page(browser, viewport={"width": 1200, "height": 900})
    page.goto((out / "04_transformer_encoder.html").as_uri())
    root = page.locator(".ae-root").first
    sync_api.expect(root).to_have_attribute("data-state", "0,0,0,0", timeout=30_000)
    before = _key_colours(root)
    root.locator(".ae-queries .ae-tok").nth(3).click()
    sync_api.expect(root).to_have_attribute("data-state", "0,0,0,3")
    assert _key_colours(root) != before, "clicking a query token recolours the keys"
    root.locator(".ae-views button").nth(1).click()  # the digits model: CLS + a 4 x 4 grid
    assert root.locator(".ae-queries .ae-grid .ae-tok").count() == 16
    root.locator(".ae-queries .ae-grid .ae-tok").nth(5).hover()
    sync_api.expect(root).to_have_attribute("data-state", "1,0,0,6")
    assert not refused and not errors, (refused, errors)
    page.close()


def test_every_figure_of_the_site_has_alt_text(site):
    from tests.test_site_figures import image_alts

    _, pages = site
    seen = 0
    for path in pages:
        for alt in image_alts(path.read_text(encoding="utf-8")):
            seen += 1
            assert alt is not None and alt.strip(), f"{path.name}: an <img> without alt text"
    assert seen > 20, f"only {seen} figures found on the site"


def test_the_site_reads_in_a_dark_theme(browser, site):
    out, _ = site
    colours = {}
    for scheme in ("light", "dark"):
        page, _, _ = _offline_page(browser, color_scheme=scheme)
        page.goto((out / "04_transformer_encoder.html").as_uri())
        colours[scheme] = page.evaluate(
            """() => {
              const luminance = c => { const [r, g, b] = c.match(/\\d+/g).map(Number);
                                       return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
              const text = document.querySelector('.jp-RenderedMarkdown p');
              return {background: luminance(getComputedStyle(document.body).backgroundColor),
                      text: luminance(getComputedStyle(text).color)};
            }"""
        )
        page.close()
    assert colours["light"]["background"] > 200 and colours["light"]["text"] < 100, colours
    assert colours["dark"]["background"] < 50 and colours["dark"]["text"] > 180, colours

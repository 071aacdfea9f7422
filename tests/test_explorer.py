"""lectures_lib.explorer: the attention explorer's HTML is self-contained and deterministic, its
static first view is the data's, and every bad input is refused with an error naming it."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from lectures_lib.explorer import AttentionExplorer, AttentionView, check_view


def _maps(layers=2, heads=3, n_q=4, n_k=5, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(layers, heads, n_q, n_k, generator=generator).softmax(-1)


def _view(**changes):
    settings = dict(name="cross", maps=_maps(), query_labels=list("abcd"), key_labels=list("vwxyz"))
    return AttentionView(**{**settings, **changes})


def test_the_html_is_self_contained_and_carries_the_data():
    explorer = AttentionExplorer([_view(), _view(name="self", maps=_maps(n_k=4), key_labels=None)])
    page = explorer.to_html(full_page=True)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "nothing from the network"
    assert "@import" not in page and "url(" not in page, "no stylesheet or font is fetched"
    payload = re.search(r'<script type="application/json" class="ae-data">(.*?)</script>', page, re.S)
    data = json.loads(payload.group(1).replace("<\\/", "</"))
    assert [v["name"] for v in data["views"]] == ["cross", "self"]
    np.testing.assert_allclose(data["views"][0]["maps"], _maps().numpy(), atol=1e-4)
    assert data["views"][1]["keys"] == list("abcd"), "self-attention: keys default to the queries"
    assert "prefers-color-scheme: dark" in page


def test_the_output_is_deterministic_and_ids_differ_between_explorers():
    first, again = AttentionExplorer([_view()]), AttentionExplorer([_view()])
    assert first.to_html() == again.to_html(), "re-executing a notebook leaves git diff empty"
    other = AttentionExplorer([_view(maps=_maps(seed=1))])
    assert first.element_id != other.element_id


def test_the_static_view_shows_the_first_querys_top_keys():
    maps = torch.zeros(1, 1, 2, 3)
    maps[0, 0, 0] = torch.tensor([0.1, 0.7, 0.2])
    maps[0, 0, 1] = torch.tensor([1.0, 0.0, 0.0])
    explorer = AttentionExplorer([AttentionView("v", maps, ["q0", "q1"], ["k0", "k1", "k2"])])
    page = explorer.to_html()
    assert "“q0” attends most to “k1” (0.70), “k2” (0.20), “k0” (0.10)" in page
    # the key tokens are coloured in the HTML itself (a viewer without scripts sees them)
    keys = page.split('class="ae-keys"')[1].split("</div>")[0]
    assert keys.count("background:#") == 3


def test_labels_are_escaped():
    explorer = AttentionExplorer([_view(query_labels=["<b>", "&", "'", '"'])])
    page = explorer.to_html()
    assert "<b>" not in page.split("<script")[0].split('class="ae-queries"')[1]


@pytest.mark.parametrize(
    "changes, error, message",
    [
        (dict(maps=_maps()[0]), ValueError, r"views\[0\]\.maps must have 4 dimensions.*maps\[:, 0\]"),
        (dict(maps=[[0.5]]), TypeError, r"views\[0\]\.maps must be a torch.Tensor or numpy array"),
        (dict(maps=_maps() * 3), ValueError, r"weights in \[0, 1\].*after the softmax"),
        (dict(maps=_maps() - 0.5), ValueError, r"weights in \[0, 1\]"),
        (dict(maps=_maps().clamp(min=0.3)), ValueError, "rows summing to more than 1"),
        (dict(maps=torch.full((1, 1, 4, 5), float("nan"))), ValueError, "NaN"),
        (dict(maps=torch.zeros(1, 0, 4, 5)), ValueError, "empty"),
        (dict(query_labels=list("abc")), ValueError, r"query_labels has 3 labels.*4 queries"),
        (dict(key_labels=list("vw")), ValueError, r"key_labels has 2 labels.*5 keys"),
        (dict(query_labels="abcd"), TypeError, "query_labels must be a list of 4 strings"),
        (dict(query_labels=[1, 2, 3, 4]), TypeError, r"query_labels\[0\] must be a str"),
        (dict(name=""), TypeError, "name must be a non-empty str"),
        (dict(grid=(3, 3)), ValueError, r"grid=\(3, 3\) lays out 9 tokens"),
        (dict(grid=[2, 2]), TypeError, "grid must be a tuple"),
        (dict(query_shade=torch.ones(3)), ValueError, r"query_shade must have shape \(4,\)"),
        (dict(key_shade=torch.full((5,), 2.0)), ValueError, r"key_shade must hold values in \[0, 1\]"),
    ],
)
def test_bad_views_are_refused_clearly(changes, error, message):
    with pytest.raises(error, match=message):
        check_view(_view(**changes))
    with pytest.raises(error, match=message):
        AttentionExplorer([_view(**changes)])


def test_a_grid_view_and_its_static_picture():
    maps = torch.rand(2, 2, 17, 17).softmax(-1)
    labels = ["CLS"] + [f"{r},{c}" for r in range(4) for c in range(4)]
    view = AttentionView("digits", maps, labels, grid=(4, 4), query_shade=torch.rand(17))
    explorer = AttentionExplorer(view)
    assert "grid-template-columns:repeat(4,2.6em)" in explorer.to_html()
    figure = explorer.plot()
    assert len(figure.axes) == 2, "one panel per head"

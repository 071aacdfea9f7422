"""The architecture pictures (lectures_lib.diagrams): each draws, labels what it claims to show,
and rejects bad arguments."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

from lectures_lib import diagrams  # noqa: E402


def texts(ax):
    return " ".join(t.get_text() for t in ax.texts)


def count(ax, kind):
    return sum(isinstance(p, kind) for p in ax.patches)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("name", diagrams.__all__)
def test_every_diagram_draws_boxes_and_arrows_on_a_given_axes(name):
    _, ax = plt.subplots()
    assert getattr(diagrams, name)(ax=ax) is ax
    assert count(ax, FancyBboxPatch) >= 3 and count(ax, FancyArrowPatch) >= 1
    assert ax.get_title(), "every picture says what it shows"
    assert not ax.axison


def test_qkv_flow_has_one_key_value_score_per_input():
    ax = diagrams.draw_qkv_flow(n_inputs=3)
    labels = texts(ax)
    for i in (1, 2, 3):
        assert f"$k^{i}$" in labels and f"$v^{i}$" in labels and f"$a^{i}$" in labels
    assert "$a^4$" not in labels and "$q^1$" in labels


def test_multi_head_draws_one_attention_per_head():
    ax = diagrams.draw_multi_head(num_heads=3)
    assert texts(ax).count("attention") == 3
    assert "$q^{i,3}$" in texts(ax)


def test_encoder_block_names_its_norm_order():
    post = texts(diagrams.draw_encoder_block(norm_first=False))
    pre = texts(diagrams.draw_encoder_block(norm_first=True))
    assert post.count("Add & LayerNorm") == 2 and "final LayerNorm" not in post
    assert pre.count("LayerNorm") == 3 and "final LayerNorm" in pre


def test_local_attention_highlights_exactly_the_window():
    ax = diagrams.draw_local_attention(n_frames=9, window=1, query=0)
    arrows = count(ax, FancyArrowPatch)
    assert arrows == 2, "frame 0 with window 1 sees frames 0 and 1"


def test_decoding_loop_feeds_every_output_back_but_the_last():
    ax = diagrams.draw_decoding_loop(words=["a", "b"])
    labels = [t.get_text() for t in ax.texts]
    assert labels.count("BEGIN") == 1 and labels.count("END") == 1
    assert count(ax, FancyArrowPatch) == 3 * 2 + 2  # 2 per step + feedback between steps


def test_alternating_stack_alternates():
    labels = [t.get_text() for t in diagrams.draw_alternating_stack(num_layers=3).texts]
    kinds = [label.split()[0] for label in labels if label.startswith(("self", "fully"))]
    assert kinds == ["self-attention", "fully"] * 3


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: diagrams.draw_multi_head(num_heads=0), ValueError),
        (lambda: diagrams.draw_qkv_flow(n_inputs=2.5), TypeError),
        (lambda: diagrams.draw_local_attention(n_frames=5, query=5), ValueError),
        (lambda: diagrams.draw_local_attention(window=-1), ValueError),
        (lambda: diagrams.draw_encoder_block(norm_first="yes"), TypeError),
        (lambda: diagrams.draw_decoding_loop(words=[]), ValueError),
        (lambda: diagrams.draw_alternating_stack(num_layers=0), ValueError),
    ],
)
def test_diagrams_reject_bad_arguments(call, error):
    with pytest.raises(error):
        call()

r"""Schematic pictures of the architecture, drawn with matplotlib patches (nothing downloaded).

Each ``draw_*`` function draws one figure of the lecture where its idea is introduced:

* :func:`draw_qkv_flow` and :func:`draw_matrix_form` in ``01_self_attention.ipynb`` (the second
  replaces the lecture's matrix figures that the notes lost);
* :func:`draw_local_attention` in ``01_self_attention.ipynb`` (truncated self-attention for
  speech);
* :func:`draw_multi_head` in ``02_multi_head_attention.ipynb``;
* :func:`draw_encoder_block` and :func:`draw_alternating_stack` in
  ``04_transformer_encoder.ipynb``;
* :func:`draw_encoder_decoder` and :func:`draw_decoding_loop` in
  ``05_transformer_decoder.ipynb``.

Every function takes an optional ``ax`` and returns it; the axes have equal aspect and no frame.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from .utils import check_non_negative_int, check_positive_int

__all__ = [
    "draw_qkv_flow",
    "draw_matrix_form",
    "draw_local_attention",
    "draw_multi_head",
    "draw_encoder_block",
    "draw_alternating_stack",
    "draw_encoder_decoder",
    "draw_decoding_loop",
]

# One colour per kind of thing, the same in every picture.
COLOURS = {
    "input": "#dbe9f6",
    "query": "#f9d5b8",
    "key": "#cde8c8",
    "value": "#e4d4f0",
    "score": "#fff2b3",
    "output": "#f6c6c6",
    "attention": "#f9d5b8",
    "norm": "#fff2b3",
    "ffn": "#cde8c8",
    "plain": "#eeeeee",
}


#: The most parts (inputs, frames, heads, layers, words) a diagram draws: a picture of more is
#: unreadable, and a typo such as 10**6 would otherwise draw for minutes.
MAX_PARTS = 64


def _count(value: object, name: str) -> int:
    """A number of parts to draw: an int in ``[1, MAX_PARTS]``."""
    value = check_positive_int(value, name)
    if value > MAX_PARTS:
        raise ValueError(
            f"{name}={value} is more than a diagram can show (at most {MAX_PARTS} parts)"
        )
    return value


def _new_axes(ax, title: object, size: tuple[float, float]):
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a str or None, got {type(title).__name__} ({title!r})")
    if ax is not None and not isinstance(ax, plt.Axes):
        raise TypeError(f"ax must be None or a matplotlib Axes, got {type(ax).__name__}")
    if ax is None:
        _, ax = plt.subplots(figsize=size)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax


def _box(ax, x: float, y: float, text: str, *, width: float = 1.0, height: float = 0.6,
         colour: str = "plain", fontsize: float = 10) -> tuple[float, float]:
    """A rounded box centred on (x, y) with ``text`` in it; returns its centre."""
    ax.add_patch(FancyBboxPatch(
        (x - width / 2, y - height / 2), width, height, boxstyle="round,pad=0.02,rounding_size=0.08",
        facecolor=COLOURS.get(colour, colour), edgecolor="#444444", linewidth=1.0,
    ))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)
    return x, y


def _arrow(ax, start: tuple[float, float], end: tuple[float, float], *, colour: str = "#444444",
           style: str = "-|>", connection: str = "arc3", linewidth: float = 1.0,
           linestyle: str = "-") -> None:
    ax.add_patch(FancyArrowPatch(
        start, end, arrowstyle=style, mutation_scale=10, color=colour, linewidth=linewidth,
        connectionstyle=connection, shrinkA=0, shrinkB=0, linestyle=linestyle,
    ))


def _finish(ax, xlim: tuple[float, float], ylim: tuple[float, float], title: str | None):
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    if title:
        ax.set_title(title)
    return ax


def draw_qkv_flow(ax=None, *, n_inputs: int = 4, title: str | None = None):
    r"""How :math:`b^1` is computed from :math:`a^1 \dots a^N` (the lecture's picture).

    Every :math:`a^i` gives a key :math:`k^i = W^k a^i` and a value :math:`v^i = W^v a^i`;
    :math:`a^1` also gives the query :math:`q^1 = W^q a^1`. The scores
    :math:`\alpha_{1,i} = q^1 \cdot k^i / \sqrt{d_k}` go through a softmax, and
    :math:`b^1 = \sum_i \alpha'_{1,i} v^i`.
    """
    n_inputs = _count(n_inputs, "n_inputs")
    ax = _new_axes(ax, title, (2.3 * n_inputs + 1, 6.2))
    step = 2.2
    xs = [1.6 + step * i for i in range(n_inputs)]
    q_x = xs[0] - 0.9
    for i, x in enumerate(xs, 1):
        a = _box(ax, x, 0.5, f"$a^{i}$", colour="input")
        k = _box(ax, x + 0.25, 1.8, f"$k^{i}$", width=0.7, colour="key")
        v = _box(ax, x + 0.95, 1.8, f"$v^{i}$", width=0.7, colour="value")
        _arrow(ax, (a[0], a[1] + 0.3), (k[0], k[1] - 0.3))
        _arrow(ax, (a[0] + 0.2, a[1] + 0.3), (v[0], v[1] - 0.3))
        score = _box(ax, x, 3.3, rf"$\alpha_{{1,{i}}}$", width=0.8, colour="score")
        _arrow(ax, (k[0], k[1] + 0.3), (score[0] + 0.1, score[1] - 0.3))
        weight = _box(ax, x, 4.4, rf"$\alpha'_{{1,{i}}}$", width=0.8, colour="score")
        _arrow(ax, (score[0], score[1] + 0.3), (weight[0], weight[1] - 0.3))
        # weighted value alpha' v flows to b^1
        _arrow(ax, (weight[0] + 0.4, weight[1] + 0.1), (xs[-1] + 2.0, 5.6),
               colour="#8a5db5", connection="arc3,rad=-0.1")
        _arrow(ax, (v[0] + 0.3, v[1] + 0.3), (weight[0] + 0.42, weight[1] - 0.05),
               colour="#8a5db5", linestyle="--")
    q = _box(ax, q_x, 1.8, "$q^1$", width=0.7, colour="query")
    _arrow(ax, (xs[0] - 0.3, 0.8), (q[0], q[1] - 0.3))
    for x in xs:  # q^1 . k^i
        _arrow(ax, (q[0], q[1] + 0.3), (x - 0.1, 3.0), colour="#d2691e", connection="arc3,rad=0.15")
    ax.text(xs[-1] + 1.45, 3.85, "softmax\n(per query)", fontsize=8, ha="left", va="center")
    b = _box(ax, xs[-1] + 2.0, 5.9, "$b^1 = \\sum_i \\alpha'_{1,i} v^i$", width=2.4,
             colour="output")
    ax.text(xs[-1] + 1.45, 2.9, r"$\alpha_{1,i} = q^1\cdot k^i/\sqrt{d_k}$", fontsize=9,
            color="#d2691e", ha="left", va="center")
    ax.text(xs[-1] + 1.45, 1.2, "$q = W^q a$\n$k = W^k a$\n$v = W^v a$", fontsize=9,
            ha="left", va="center")
    del b
    return _finish(ax, (-0.6, xs[-1] + 3.4), (0, 6.5),
                   title or "self-attention: how $b^1$ is computed (all $b^i$ alike, at once)")


def _matrix(ax, x: float, y: float, width: float, height: float, name: str, shape: str,
            colour: str) -> None:
    ax.add_patch(FancyBboxPatch((x, y), width, height, boxstyle="square,pad=0",
                                facecolor=COLOURS[colour], edgecolor="#444444"))
    ax.text(x + width / 2, y + height / 2, name, ha="center", va="center", fontsize=11)
    ax.text(x + width / 2, y - 0.25, shape, ha="center", va="top", fontsize=7.5, color="#555555")


def draw_matrix_form(ax=None, *, title: str | None = None):
    r"""The lecture's matrix form, column convention: :math:`Q = W^q I` (and K, V),
    :math:`A = K^\top Q / \sqrt{d_k}`, :math:`A' = \operatorname{softmax}(A)` per column,
    :math:`O = V A'`. Boxes are drawn to scale for :math:`d_{model} = 4`, :math:`d_k = 3`,
    :math:`d_v = 2`, :math:`N = 4`."""
    ax = _new_axes(ax, title, (12, 4.0))
    unit = 0.4
    # Row 1: Q = W^q I, K = W^k I, V = W^v I
    x = 0.2
    for name, out_rows, colour in (("q", 3, "query"), ("k", 3, "key"), ("v", 2, "value")):
        _matrix(ax, x, 4.0, 4 * unit, out_rows * unit, f"$W^{name}$", f"({out_rows}, d_model)",
                "plain")
        ax.text(x + 4 * unit + 0.12, 4.0 + out_rows * unit / 2, "×", fontsize=12, va="center")
        _matrix(ax, x + 4 * unit + 0.4, 4.0, 4 * unit, 4 * unit, "$I$", "(d_model, N)", "input")
        ax.text(x + 8 * unit + 0.55, 4.0 + out_rows * unit / 2, "=", fontsize=12, va="center")
        _matrix(ax, x + 8 * unit + 0.85, 4.0, 4 * unit, out_rows * unit, f"${name.upper()}$",
                f"({out_rows}, N)", colour)
        x += 12 * unit + 1.5
    row_one_end = x
    # Row 2: A = K^T Q / sqrt(d_k) -> A' -> O = V A'
    y = 0.6
    _matrix(ax, 0.2, y, 3 * unit, 4 * unit, r"$K^\top$", "(N, d_k)", "key")
    ax.text(0.2 + 3 * unit + 0.1, y + 2 * unit, "×", fontsize=12, va="center")
    _matrix(ax, 0.2 + 3 * unit + 0.4, y + unit, 4 * unit, 3 * unit, "$Q$", "(d_k, N)", "query")
    ax.text(0.2 + 7 * unit + 0.5, y + 2 * unit, r"$/\sqrt{d_k}$ =", fontsize=11, va="center")
    a_x = 0.2 + 7 * unit + 1.55
    _matrix(ax, a_x, y, 4 * unit, 4 * unit, "$A$", "(N, N): column i = query i", "score")
    _arrow(ax, (a_x + 4 * unit + 0.1, y + 2 * unit), (a_x + 4 * unit + 1.2, y + 2 * unit))
    ax.text(a_x + 4 * unit + 0.65, y + 2 * unit + 0.2, "softmax\nper column", fontsize=8,
            ha="center", va="bottom")
    ap_x = a_x + 4 * unit + 1.3
    _matrix(ax, ap_x, y, 4 * unit, 4 * unit, "$A'$", "columns sum to 1", "score")
    o_x = ap_x + 4 * unit + 1.0
    _matrix(ax, o_x, y + unit, 4 * unit, 2 * unit, "$V$", "(d_v, N)", "value")
    ax.text(o_x + 4 * unit + 0.1, y + 2 * unit, "×  $A'$  =", fontsize=12, va="center")
    _matrix(ax, o_x + 4 * unit + 1.3, y + unit, 4 * unit, 2 * unit, "$O$",
            "(d_v, N): column i = $b^i$", "output")
    ax.text(0.2, 3.05, "only $W^q, W^k, W^v$ are learned", fontsize=9, style="italic")
    return _finish(ax, (0, max(row_one_end, o_x + 8 * unit + 1.6)), (0, 5.8),
                   title or "self-attention as matrix products (the lecture's columns)")


def draw_local_attention(ax=None, *, n_frames: int = 11, window: int = 2, query: int = 5,
                         title: str | None = None):
    r"""Truncated (local) self-attention over speech frames: frame ``query`` attends only to the
    frames within ``window`` of it (:math:`|i - j| \le w`, the mask
    :func:`lectures_lib.variants.local_mask`)."""
    n_frames = _count(n_frames, "n_frames")
    window = check_non_negative_int(window, "window")
    query = check_non_negative_int(query, "query")
    if query >= n_frames:
        raise ValueError(f"query must be a frame index < n_frames={n_frames}, got {query}")
    ax = _new_axes(ax, title, (0.75 * n_frames + 1, 2.8))
    for j in range(n_frames):
        seen = abs(j - query) <= window
        colour = "key" if seen else "plain"
        _box(ax, j * 0.8, 0.4, f"{j}", width=0.6, height=0.5, colour=colour, fontsize=8)
        if seen:
            _arrow(ax, (query * 0.8, 1.6), (j * 0.8, 0.7), colour="#2e7d32")
    _box(ax, query * 0.8, 1.9, f"$b^{{{query}}}$", width=0.7, height=0.5, colour="output")
    ax.text(-0.4, -0.15, "speech frames (10 ms apart)", fontsize=8, ha="left", va="top")
    return _finish(ax, (-0.6, n_frames * 0.8), (-0.6, 2.5),
                   title or f"truncated self-attention: frame {query} sees only |i - j| <= {window}")


def draw_multi_head(ax=None, *, num_heads: int = 2, title: str | None = None):
    r"""Multi-head self-attention for one position :math:`i` (the lecture's picture):
    :math:`q^i` is split into :math:`q^{i,1}, \dots, q^{i,H}` (likewise :math:`k`, :math:`v`),
    head :math:`h` attends with its own :math:`q^{\cdot,h}, k^{\cdot,h}, v^{\cdot,h}` only, and
    :math:`b^i = W^O [b^{i,1}; \dots; b^{i,H}]`."""
    num_heads = _count(num_heads, "num_heads")
    ax = _new_axes(ax, title, (2.2 + 2.6 * num_heads, 6.4))
    centre = 1.3 * num_heads + 0.2
    a = _box(ax, centre, 0.4, "$a^i$", colour="input")
    parents = {}
    for offset, name in zip((-1.2, 0.0, 1.2), ("q", "k", "v"), strict=True):
        parents[name] = _box(ax, centre + offset, 1.5, f"${name}^i$", width=0.7,
                             colour={"q": "query", "k": "key", "v": "value"}[name])
        _arrow(ax, (a[0], a[1] + 0.3), (parents[name][0], parents[name][1] - 0.3))
    heads_out = []
    for h in range(num_heads):
        hx = 0.9 + 2.6 * h
        children = []
        for offset, name in zip((-0.75, 0.0, 0.75), ("q", "k", "v"), strict=True):
            child = _box(ax, hx + offset, 2.9, f"${name}^{{i,{h + 1}}}$", width=0.7, height=0.5,
                         colour={"q": "query", "k": "key", "v": "value"}[name], fontsize=8.5)
            _arrow(ax, (parents[name][0], parents[name][1] + 0.3), (child[0], child[1] - 0.25),
                   colour="#888888")
            children.append(child)
        head = _box(ax, hx, 4.1, f"head {h + 1}:\nattention", width=2.0, height=0.7,
                    colour="score", fontsize=8.5)
        for child in children:
            _arrow(ax, (child[0], child[1] + 0.25), (head[0] + (child[0] - hx) * 0.6,
                                                     head[1] - 0.35))
        out = _box(ax, hx, 5.1, f"$b^{{i,{h + 1}}}$", width=0.8, height=0.5, colour="output")
        _arrow(ax, (head[0], head[1] + 0.35), (out[0], out[1] - 0.25))
        heads_out.append(out)
    concat = _box(ax, centre, 6.1, "concat, then $W^O$  →  $b^i$", width=3.0, height=0.55,
                  colour="output", fontsize=9)
    for out in heads_out:
        _arrow(ax, (out[0], out[1] + 0.25), (concat[0] + (out[0] - centre) * 0.3,
                                             concat[1] - 0.28))
    ax.text(0.0, 2.25, "$q^{i,h} = W^{q,h} q^i$", fontsize=8.5, color="#555555")
    return _finish(ax, (-0.6, 2.6 * num_heads + 0.3), (0, 6.6),
                   title or f"multi-head self-attention, {num_heads} heads (position i)")


def _block_stack(ax, x: float, y0: float, layers: Sequence[tuple[str, str]], *,
                 width: float = 2.6, gap: float = 0.95, residual: bool = True,
                 add_after: Sequence[int] = ()) -> list[tuple[float, float]]:
    """Boxes from bottom to top; a residual arrow skips each box listed in ``add_after``."""
    centres = []
    for index, (text, colour) in enumerate(layers):
        centres.append(_box(ax, x, y0 + index * gap, text, width=width, height=0.55,
                            colour=colour, fontsize=9))
        if index:
            _arrow(ax, (x, y0 + (index - 1) * gap + 0.28), (x, y0 + index * gap - 0.28))
    if residual:
        for index in add_after:  # skip box index-1 (the sub-layer) into box index (Add & Norm)
            start_y = y0 + (index - 1) * gap - 0.45
            end_y = y0 + index * gap
            ax.add_patch(FancyArrowPatch(
                (x - width / 2, start_y), (x - width / 2, end_y), arrowstyle="-|>",
                connectionstyle="arc,angleA=180,angleB=180,armA=18,armB=18,rad=5",
                mutation_scale=9, color="#1f77b4", linewidth=1.1,
            ))
    return centres


def draw_encoder_block(ax=None, *, norm_first: bool = False, title: str | None = None):
    r"""One encoder block between the input embedding and the next block.

    Post-LN (the paper, ``norm_first=False``): attention → Add & Norm → feed-forward → Add & Norm;
    Pre-LN (``norm_first=True``): the LayerNorm moves in front of each sub-layer. Blue arrows
    are the residual connections :math:`Y = X + H(X)`."""
    if not isinstance(norm_first, bool):
        raise TypeError(f"norm_first must be a bool, got {type(norm_first).__name__}")
    ax = _new_axes(ax, title, (4.6, 7.2))
    x = 2.2
    _box(ax, x, 0.3, "input tokens", width=2.2, height=0.5, fontsize=9)
    layers = [("input embedding $+$ positional enc.", "input")]
    if norm_first:
        layers += [("LayerNorm", "norm"), ("multi-head self-attention", "attention"),
                   ("Add (residual)", "plain"), ("LayerNorm", "norm"),
                   ("feed-forward (FC, ReLU, FC)", "ffn"), ("Add (residual)", "plain")]
    else:
        layers += [("multi-head self-attention", "attention"), ("Add & LayerNorm", "norm"),
                   ("feed-forward (FC, ReLU, FC)", "ffn"), ("Add & LayerNorm", "norm")]
    centres = _block_stack(ax, x, 1.1, layers, width=3.1, residual=False)
    _arrow(ax, (x, 0.55), (x, 1.1 - 0.28))
    # residual: from the input of the sub-layer (of its LayerNorm in Pre-LN) to the Add
    for first, add in ([(1, 3), (4, 6)] if norm_first else [(1, 2), (3, 4)]):
        ax.add_patch(FancyArrowPatch(
            (x + 1.55, centres[first][1] - 0.47), (x + 1.55, centres[add][1]), arrowstyle="-|>",
            connectionstyle="arc,angleA=0,angleB=0,armA=18,armB=18,rad=5",
            mutation_scale=9, color="#1f77b4", linewidth=1.2,
        ))
    top = centres[-1][1]
    bottom = centres[1][1] - 0.45
    ax.add_patch(FancyBboxPatch((x - 1.75, bottom), 3.85, top - bottom + 0.8,
                                boxstyle="round,pad=0.05", fill=False, linestyle="--",
                                edgecolor="#777777"))
    ax.text(x + 2.25, (top + bottom) / 2, "× N\n(no shared\nparameters)", fontsize=8,
            va="center")
    if norm_first:
        _box(ax, x, top + 1.05, "final LayerNorm", width=2.2, height=0.5, colour="norm",
             fontsize=9)
        _arrow(ax, (x, top + 0.28), (x, top + 0.8))
        top += 1.05
    _arrow(ax, (x, top + 0.28), (x, top + 1.05))
    ax.text(x, top + 1.1, "one vector per token (the memory)", ha="center", fontsize=9)
    name = "Pre-LN" if norm_first else "Post-LN (the paper)"
    return _finish(ax, (0, 5.6), (0, top + 1.5), title or f"the encoder block, {name}")


def draw_alternating_stack(ax=None, *, num_layers: int = 2, title: str | None = None):
    """Self-attention layers alternating with fully connected (per-token) layers."""
    num_layers = _count(num_layers, "num_layers")
    ax = _new_axes(ax, title, (3.6, 1.2 + 1.6 * num_layers))
    layers = [("input vectors $a^1 \\dots a^N$", "input")]
    for _ in range(num_layers):
        layers += [("self-attention (mixes tokens)", "attention"),
                   ("fully connected (each token)", "ffn")]
    layers.append(("output vectors", "output"))
    _block_stack(ax, 1.6, 0.4, layers, width=2.9, gap=0.8, residual=False)
    top = 0.4 + 0.8 * (len(layers) - 1)
    return _finish(ax, (0, 3.2), (0, top + 0.6),
                   title or "self-attention and FC layers, alternating")


def draw_encoder_decoder(ax=None, *, title: str | None = None):
    r"""The whole Transformer: encoder stack (left), decoder stack (right) with masked
    self-attention, cross attention to the encoder's output, and the output linear map + softmax."""
    ax = _new_axes(ax, title, (8.5, 7.6))
    enc = _block_stack(ax, 1.8, 1.0, [
        ("source embedding + PE", "input"), ("multi-head self-attention", "attention"),
        ("Add & Norm", "norm"), ("feed-forward", "ffn"), ("Add & Norm", "norm"),
    ], width=2.8)
    dec = _block_stack(ax, 6.2, 1.0, [
        ("target embedding + PE", "input"), ("masked multi-head\nself-attention", "attention"),
        ("Add & Norm", "norm"), ("cross attention\n(Dec-Enc)", "attention"),
        ("Add & Norm", "norm"), ("feed-forward", "ffn"), ("Add & Norm", "norm"),
        ("linear (to vocabulary)", "output"), ("softmax", "output"),
    ], width=2.8)
    for centres, count, x in ((enc, 4, 1.8), (dec, 6, 6.2)):
        bottom, top = centres[1][1] - 0.4, centres[count][1] + 0.4
        ax.add_patch(FancyBboxPatch((x - 1.65, bottom), 3.3, top - bottom, fill=False,
                                    boxstyle="round,pad=0.05", linestyle="--",
                                    edgecolor="#777777"))
        ax.text(x - 1.75, (top + bottom) / 2, "N ×", ha="right", va="center", fontsize=9)
    # memory: encoder output -> keys and values of every decoder block's cross attention
    memory_y = enc[-1][1] + 0.8
    _arrow(ax, (1.8, enc[-1][1] + 0.28), (1.8, memory_y))
    ax.text(1.8, memory_y + 0.1, "memory: one vector per\nsource token", ha="center",
            va="bottom", fontsize=8)
    _arrow(ax, (3.2, memory_y - 0.2), (4.8, dec[3][1]), colour="#d2691e",
           connection="arc3,rad=-0.25", linewidth=1.4)
    ax.text(3.35, dec[3][1] + 0.55, "keys, values", fontsize=8, color="#d2691e")
    ax.text(1.8, 0.35, "source: 3 0 4 2", ha="center", fontsize=9)
    ax.text(6.2, 0.35, "decoder input: BEGIN three thousand ...", ha="center", fontsize=8.5)
    _arrow(ax, (1.8, 0.5), (1.8, enc[0][1] - 0.28))
    _arrow(ax, (6.2, 0.5), (6.2, dec[0][1] - 0.28))
    _arrow(ax, (6.2, dec[-1][1] + 0.28), (6.2, dec[-1][1] + 0.7))
    ax.text(6.2, dec[-1][1] + 0.75, "P(next word)", ha="center", fontsize=9)
    ax.text(0.2, enc[-1][1] + 2.0, "ENCODER", fontsize=11, weight="bold")
    ax.text(4.7, dec[-1][1] + 1.2, "DECODER", fontsize=11, weight="bold")
    return _finish(ax, (0, 8.2), (0, dec[-1][1] + 1.5),
                   title or "the Transformer: encoder–decoder")


def draw_decoding_loop(ax=None, *, words: Sequence[str] = ("three", "thousand", "forty", "two"),
                       title: str | None = None):
    """Autoregressive decoding: BEGIN in, a word out, fed back as the next input, until END."""
    if isinstance(words, str) or not isinstance(words, Sequence):
        raise TypeError(f"words must be a list of strings, got {type(words).__name__} ({words!r})")
    words = list(words)
    if not words or not all(isinstance(w, str) for w in words):
        raise ValueError(f"words must be a non-empty sequence of strings, got {words!r}")
    _count(len(words), "len(words)")
    outputs = [*words, "END"]
    inputs = ["BEGIN", *words]
    ax = _new_axes(ax, title, (1.9 * len(outputs) + 1, 3.6))
    for t, (inp, out) in enumerate(zip(inputs, outputs, strict=True)):
        x = 1.0 + 1.9 * t
        _box(ax, x, 0.4, inp, width=1.5, height=0.5, colour="input", fontsize=9)
        _box(ax, x, 1.6, f"decoder\nstep {t + 1}", width=1.5, height=0.8, colour="attention",
             fontsize=8.5)
        _box(ax, x, 2.9, out, width=1.5, height=0.5, colour="output", fontsize=9)
        _arrow(ax, (x, 0.65), (x, 1.2))
        _arrow(ax, (x, 2.0), (x, 2.65))
        if t + 1 < len(outputs):  # the output is the next step's input
            _arrow(ax, (x + 0.75, 2.9), (x + 1.9 - 0.75, 0.4), colour="#d2691e",
                   connection="arc3,rad=-0.2", linestyle="--")
    ax.text(0.25, -0.35, "each step reads BEGIN and every word produced so far (and the "
            "encoder's memory); it stops at END", fontsize=8, ha="left")
    return _finish(ax, (0, 1.9 * len(outputs) + 0.2), (-0.6, 3.4),
                   title or "autoregressive decoding: each output is the next input")

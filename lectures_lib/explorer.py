"""An interactive attention explorer: click (or hover over) a token or a patch and see what it
attends to, per layer and head. A teaching aid for 04's encoder, 05's translator (self- and
cross-attention) and the digits ViT.

The explorer is **one self-contained piece of HTML**: its CSS, its data (JSON) and its script
(plain JavaScript, no library) are written into the cell's output; nothing is loaded from a CDN
or the network, no font is fetched. It therefore works offline in JupyterLab, in the stored
notebook and on the static site (``make site``).

* The view it shows first (first attention, layer 0, head 0, first query token) is rendered in
  the HTML itself, so a viewer that runs no script still shows a correct picture: GitHub's
  notebook viewer, or JupyterLab opening a stored notebook that is not *trusted*. JupyterLab
  runs the script of a stored output only in a trusted notebook: the copies the course writes
  for a learner (``make lab-student``, ``python -m course_tools copy``) are trusted for that
  learner (:func:`course_tools.publish.copy.trust_notebooks`), so there it is live at once;
  elsewhere the static view says so in one line (:data:`STATIC_HINT`: run the cell, or
  ``jupyter trust`` the notebook). Beside it, the notebooks also keep a static PNG of the
  same view (:meth:`AttentionExplorer.plot`) for GitHub, which shows pictures but runs no script.
* Colours: ``cividis``, a colour map readable with every common colour-vision deficiency,
  scaled to the query's largest weight (the caption and each key's tooltip give the numbers);
  the widget follows the page's light or dark scheme (``prefers-color-scheme``).
* The output is deterministic (element ids are derived from the data, not random), so
  re-executing a notebook leaves ``git diff`` empty.

Usage::

    maps = model.attention_maps(tokens)            # (layers, batch, heads, n, n)
    AttentionExplorer([AttentionView("encoder self-attention", maps[:, 0], labels)])

Every argument is checked once, at the door (:func:`check_view`), with an error naming it.
"""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["AttentionView", "AttentionExplorer", "check_view", "CIVIDIS_STOPS"]

# The line above the tokens: the static HTML says how to make it live (a viewer that runs no
# script, or JupyterLab on a notebook it does not trust, shows this one); the script replaces it.
STATIC_HINT = "a still picture: run this cell to make it clickable"
LIVE_HINT = "click or hover a token"

# cividis sampled at 0, 0.1, ..., 1 (matplotlib's table): interpolated linearly in the browser
CIVIDIS_STOPS = [
    "#00224e", "#123570", "#3b496c", "#575d6d", "#707173", "#8a8779",
    "#a69d75", "#c4b56c", "#e4cf5b", "#fee838", "#fee838",
]


def _to_array(maps: object, name: str) -> np.ndarray:
    if isinstance(maps, torch.Tensor):
        maps = maps.detach().to("cpu", torch.float64).numpy()
    elif isinstance(maps, np.ndarray):
        if not np.issubdtype(maps.dtype, np.number) or np.issubdtype(maps.dtype, np.complexfloating):
            raise TypeError(f"{name} must hold real numbers, got dtype {maps.dtype}")
        maps = maps.astype(np.float64)
    else:
        raise TypeError(
            f"{name} must be a torch.Tensor or numpy array (layers, heads, n_queries, n_keys), "
            f"got {type(maps).__name__}"
        )
    return maps


def _check_labels(labels: object, name: str, expected: int, axis: str) -> list[str]:
    if isinstance(labels, (str, bytes)) or not isinstance(labels, Sequence):
        raise TypeError(f"{name} must be a list of {expected} strings, got {type(labels).__name__}")
    if len(labels) != expected:
        raise ValueError(
            f"{name} has {len(labels)} labels, but the maps have {expected} {axis} "
            f"(maps shape is (layers, heads, n_queries, n_keys))"
        )
    for index, label in enumerate(labels):
        if not isinstance(label, str):
            raise TypeError(f"{name}[{index}] must be a str, got {type(label).__name__}")
    return list(labels)


def _check_shade(shade: object, name: str, expected: int) -> list[float] | None:
    if shade is None:
        return None
    values = _to_array(shade, name)
    if values.shape != (expected,):
        raise ValueError(f"{name} must have shape ({expected},), got {values.shape}")
    if not np.all(np.isfinite(values)) or values.min() < 0 or values.max() > 1:
        raise ValueError(f"{name} must hold values in [0, 1]")
    return [round(float(v), 4) for v in values]


def _check_grid(grid: object, name: str, n_tokens: int) -> tuple[int, int] | None:
    if grid is None:
        return None
    if (not isinstance(grid, tuple) or len(grid) != 2
            or not all(isinstance(g, int) and not isinstance(g, bool) and g > 0 for g in grid)):
        raise TypeError(f"{name} must be a tuple (rows, cols) of two positive ints, got {grid!r}")
    rows, cols = grid
    if rows * cols > n_tokens:
        raise ValueError(
            f"{name}={grid} lays out {rows * cols} tokens, but there are only {n_tokens}"
        )
    return grid


@dataclass
class AttentionView:
    """One attention to explore: ``maps`` ``(layers, heads, n_queries, n_keys)`` (one example of
    a batch), each row a distribution over the keys.

    ``query_labels`` (``n_queries`` strings) and ``key_labels`` (``n_keys``; default: the query
    labels, for self-attention). ``grid=(rows, cols)`` lays out the *last* ``rows * cols`` tokens
    of each side as a grid (image patches; the leading tokens, e.g. a class token, stand above
    it); ``query_shade`` / ``key_shade`` (values in [0, 1], one per token) tint the tokens in
    grey, e.g. the ink of each patch, so the image is visible under the grid.
    """

    name: str
    maps: object
    query_labels: Sequence[str]
    key_labels: Sequence[str] | None = None
    grid: tuple[int, int] | None = None
    query_shade: object = None
    key_shade: object = None


def check_view(view: object, index: int = 0) -> dict:
    """Validate one :class:`AttentionView`; return it as plain data (lists, numbers)."""
    where = f"views[{index}]"
    if not isinstance(view, AttentionView):
        raise TypeError(f"{where} must be an AttentionView, got {type(view).__name__}")
    if not isinstance(view.name, str) or not view.name:
        raise TypeError(f"{where}.name must be a non-empty str, got {view.name!r}")
    maps = _to_array(view.maps, f"{where}.maps")
    if maps.ndim != 4:
        raise ValueError(
            f"{where}.maps must have 4 dimensions (layers, heads, n_queries, n_keys), got "
            f"{maps.ndim} (shape {maps.shape}); pick one example of the batch, e.g. maps[:, 0]"
        )
    if 0 in maps.shape:
        raise ValueError(f"{where}.maps must not be empty, got shape {maps.shape}")
    if not np.all(np.isfinite(maps)):
        raise ValueError(f"{where}.maps holds NaN or infinite weights")
    if maps.min() < 0 or maps.max() > 1 + 1e-6:
        raise ValueError(
            f"{where}.maps must hold attention weights in [0, 1], got values in "
            f"[{maps.min():.3g}, {maps.max():.3g}]: pass the weights after the softmax"
        )
    row_sums = maps.sum(-1)
    if np.any(row_sums > 1 + 1e-4):
        raise ValueError(f"{where}.maps has rows summing to more than 1 (up to {row_sums.max():.4g})")
    layers, heads, n_q, n_k = maps.shape
    queries = _check_labels(view.query_labels, f"{where}.query_labels", n_q, "queries")
    keys = queries if view.key_labels is None else view.key_labels
    keys = _check_labels(keys, f"{where}.key_labels", n_k, "keys")
    if view.grid is not None:
        _check_grid(view.grid, f"{where}.grid", min(n_q, n_k))
    return {
        "name": view.name,
        "maps": np.round(maps, 4).tolist(),
        "queries": queries,
        "keys": keys,
        "grid": list(view.grid) if view.grid else None,
        "qshade": _check_shade(view.query_shade, f"{where}.query_shade", n_q),
        "kshade": _check_shade(view.key_shade, f"{where}.key_shade", n_k),
        "layers": layers,
        "heads": heads,
    }


def _colour(weight: float) -> str:
    """cividis at ``weight`` in [0, 1], as the browser script computes it."""
    position = min(max(weight, 0.0), 1.0) * (len(CIVIDIS_STOPS) - 2)
    low = int(position)
    frac = position - low
    a, b = CIVIDIS_STOPS[low], CIVIDIS_STOPS[low + 1]
    mixed = [round(int(a[i:i + 2], 16) * (1 - frac) + int(b[i:i + 2], 16) * frac)
             for i in (1, 3, 5)]
    return "#" + "".join(f"{c:02x}" for c in mixed)


def _text_colour(weight: float) -> str:
    return "#000" if weight > 0.55 else "#fff"


_CSS = """
.ae-root{font:13px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1b1b1b;
 background:#fafafa;border:1px solid #ccc;border-radius:6px;padding:8px 10px;margin:6px 0;
 max-width:100%;overflow-x:auto}
.ae-root .ae-title{font-weight:600;margin-bottom:4px}
.ae-root .ae-row{display:flex;flex-wrap:wrap;gap:4px;align-items:center;margin:3px 0}
.ae-root .ae-row>span.ae-what{min-width:5.5em;color:#555}
.ae-root button{font:inherit;border:1px solid #999;background:#fff;color:#1b1b1b;
 border-radius:4px;padding:1px 7px;cursor:pointer}
.ae-root button[aria-pressed=true]{background:#1b1b1b;color:#fff;border-color:#1b1b1b}
.ae-root .ae-tok{display:inline-block;min-width:1.8em;text-align:center;padding:2px 4px;
 border:2px solid transparent;border-radius:4px;cursor:pointer;user-select:none}
.ae-root .ae-q{background:#e8e8e8;color:#1b1b1b}
.ae-root .ae-q.ae-sel{border-color:#d55e00}
.ae-root .ae-grid{display:inline-grid;gap:2px;margin-top:2px}
.ae-root .ae-caption{color:#444;margin-top:4px;min-height:1.4em}
@media (prefers-color-scheme: dark){
 .ae-root{color:#e6e6e6;background:#1e1e1e;border-color:#555}
 .ae-root .ae-row>span.ae-what,.ae-root .ae-caption{color:#bbb}
 .ae-root button{background:#2a2a2a;color:#e6e6e6;border-color:#777}
 .ae-root button[aria-pressed=true]{background:#e6e6e6;color:#111}
 .ae-root .ae-q{background:#3a3a3a;color:#e6e6e6}
 .ae-root .ae-q.ae-sel{border-color:#ff9f4a}
}
"""

# The script: plain JavaScript, scoped to its own root element; it reads the JSON beside it.
_SCRIPT = r"""
(function(){
var root=document.getElementById("%(id)s"); if(!root||root.dataset.live)return;
root.dataset.live="1";
root.querySelector(".ae-how").textContent="%(live)s";
var D=JSON.parse(root.querySelector("script.ae-data").textContent);
var S={view:0,layer:0,head:0,query:0};
function hex(c){return [1,3,5].map(function(i){return parseInt(c.substr(i,2),16);});}
function colour(w){w=Math.min(Math.max(w,0),1);var p=w*(D.stops.length-2),lo=Math.floor(p),f=p-lo;
 var a=hex(D.stops[lo]),b=hex(D.stops[lo+1]);
 return "#"+a.map(function(x,i){var v=Math.round(x*(1-f)+b[i]*f);return (v<16?"0":"")+v.toString(16);}).join("");}
function grey(s){var v=Math.round(235-200*s);return "rgb("+v+","+v+","+v+")";}
function el(tag,cls,text){var e=document.createElement(tag);if(cls)e.className=cls;if(text!=null)e.textContent=text;return e;}
function buttons(row,what,n,names,key){row.innerHTML="";row.appendChild(el("span","ae-what",what));
 for(var i=0;i<n;i++){var b=el("button",null,names?names[i]:String(i));b.dataset.index=i;
  b.setAttribute("aria-pressed",String(S[key]===i));
  b.addEventListener("click",function(e){S[key]=+e.currentTarget.dataset.index;
   if(key==="view"){S.layer=0;S.head=0;S.query=0;}render();});row.appendChild(b);}}
function side(box,labels,grid,cls){box.innerHTML="";var n=labels.length,lead=grid?n-grid[0]*grid[1]:n,out=[];
 var line=el("div","ae-row");box.appendChild(line);
 for(var i=0;i<n;i++){var t=el("span","ae-tok "+cls,labels[i]);t.dataset.index=i;out.push(t);
  if(i<lead)line.appendChild(t);}
 if(grid){var g=el("div","ae-grid");g.style.gridTemplateColumns="repeat("+grid[1]+",2.6em)";
  for(var j=lead;j<n;j++)g.appendChild(out[j]);box.appendChild(g);}
 return out;}
function render(){
 var v=D.views[S.view];
 if(D.views.length>1)buttons(root.querySelector(".ae-views"),"attention",D.views.length,D.views.map(function(x){return x.name;}),"view");
 buttons(root.querySelector(".ae-layers"),"layer",v.layers,null,"layer");
 buttons(root.querySelector(".ae-heads"),"head",v.heads,null,"head");
 var qs=side(root.querySelector(".ae-queries"),v.queries,v.grid,"ae-q");
 var ks=side(root.querySelector(".ae-keys"),v.keys,v.grid,"ae-k");
 qs.forEach(function(t,i){if(v.qshade){t.style.background=grey(v.qshade[i]);t.style.color=v.qshade[i]>0.5?"#fff":"#000";}
  t.setAttribute("role","button");t.setAttribute("tabindex","0");
  t.addEventListener("click",function(){S.query=i;paint();});
  t.addEventListener("mouseenter",function(){paint(i);});
  t.addEventListener("mouseleave",function(){paint();});
  t.addEventListener("keydown",function(e){if(e.key==="Enter"||e.key===" "){S.query=i;paint();e.preventDefault();}});});
 function paint(hover){var q=hover==null?S.query:hover,row=v.maps[S.layer][S.head][q];
  qs.forEach(function(t,i){t.classList.toggle("ae-sel",i===q);});
  var top=Math.max.apply(null,row)||1;
  ks.forEach(function(t,j){var w=row[j]/top;t.style.background=colour(w);t.style.color=w>0.55?"#000":"#fff";
   t.title=v.keys[j]+": "+row[j].toFixed(3);
   if(v.kshade)t.style.borderColor=grey(v.kshade[j]);});
  var order=row.map(function(w,j){return [w,j];}).sort(function(a,b){return b[0]-a[0];}).slice(0,3);
  root.querySelector(".ae-caption").textContent=v.name+", layer "+S.layer+", head "+S.head+": \u201c"+
   v.queries[q]+"\u201d attends most to "+order.map(function(p){return "\u201c"+v.keys[p[1]]+"\u201d ("+p[0].toFixed(2)+")";}).join(", ");
  root.dataset.state=[S.view,S.layer,S.head,q].join(",");}
 paint();}
render();
})();
"""


class AttentionExplorer:
    """The widget: one or more :class:`AttentionView` s, with buttons for attention, layer and
    head, the query tokens (click or hover) and the key tokens coloured by their weight.

    Display it in a notebook (``display(explorer)``: its ``_repr_html_``), or write a page with
    :meth:`to_html` ``(full_page=True)``. :meth:`plot` draws the first view's starting state as
    a static matplotlib figure (the picture kept for viewers that run no script).
    """

    def __init__(self, views: Sequence[AttentionView], *, title: str = "Attention explorer") -> None:
        if isinstance(views, AttentionView):
            views = [views]
        if not isinstance(views, Sequence) or isinstance(views, str) or not views:
            raise TypeError(f"views must be a non-empty list of AttentionView, got {views!r:.80}")
        if not isinstance(title, str):
            raise TypeError(f"title must be a str, got {type(title).__name__}")
        self.title = title
        self.views = list(views)
        self._data = [check_view(view, index) for index, view in enumerate(self.views)]
        payload = json.dumps({"views": self._data, "stops": CIVIDIS_STOPS}, separators=(",", ":"))
        self._payload = payload
        self.element_id = "ae-" + hashlib.sha256((title + payload).encode()).hexdigest()[:12]

    # -- HTML ----------------------------------------------------------------------------------

    def _static_tokens(self, labels, grid, kind, weights=None, shade=None, selected=None) -> str:
        """The tokens of one side as HTML (what a viewer without scripts shows)."""
        def token(i, label):
            style = ""
            if weights is not None:
                w = weights[i] / (max(weights) or 1.0)  # the row's largest weight is brightest
                style = f"background:{_colour(w)};color:{_text_colour(w)}"
            elif shade is not None:
                v = round(235 - 200 * shade[i])
                style = f"background:rgb({v},{v},{v});color:{'#fff' if shade[i] > 0.5 else '#000'}"
            sel = " ae-sel" if i == selected else ""
            return (f'<span class="ae-tok {kind}{sel}" style="{style}">'
                    f"{html.escape(label)}</span>")

        n = len(labels)
        lead = n - grid[0] * grid[1] if grid else n
        out = '<div class="ae-row">' + "".join(token(i, labels[i]) for i in range(lead)) + "</div>"
        if grid:
            cells = "".join(token(i, labels[i]) for i in range(lead, n))
            out += (f'<div class="ae-grid" style="grid-template-columns:repeat({grid[1]},2.6em)">'
                    f"{cells}</div>")
        return out

    def to_html(self, full_page: bool = False) -> str:
        """The widget's HTML (CSS, data and script inside); ``full_page``: a whole document."""
        first = self._data[0]
        row = first["maps"][0][0][0]  # view 0, layer 0, head 0, query 0: the starting state
        top = sorted(range(len(row)), key=lambda j: -row[j])[:3]
        caption = (f"{first['name']}, layer 0, head 0: \u201c{first['queries'][0]}\u201d attends "
                   "most to " + ", ".join(f"\u201c{first['keys'][j]}\u201d ({row[j]:.2f})"
                                          for j in top))
        css = _CSS.replace(".ae-root", f"#{self.element_id}.ae-root")
        payload = self._payload.replace("</", "<\\/")  # no "</script>" inside the JSON
        body = (
            f'<div class="ae-root" id="{self.element_id}" role="group" '
            f'aria-label="{html.escape(self.title)}">'
            f"<style>{css}</style>"
            f'<div class="ae-title">{html.escape(self.title)}</div>'
            '<div class="ae-row ae-views"></div><div class="ae-row ae-layers"></div>'
            '<div class="ae-row ae-heads"></div>'
            '<div class="ae-row"><span class="ae-what">query</span>'
            f'<small class="ae-how">{STATIC_HINT}</small></div>'
            f'<div class="ae-queries">{self._static_tokens(first["queries"], first["grid"], "ae-q", shade=first["qshade"], selected=0)}</div>'
            '<div class="ae-row"><span class="ae-what">attends to</span></div>'
            f'<div class="ae-keys">{self._static_tokens(first["keys"], first["grid"], "ae-k", weights=row)}</div>'
            f'<div class="ae-caption">{html.escape(caption)}</div>'
            f'<script type="application/json" class="ae-data">{payload}</script>'
            f"<script>{_SCRIPT % {'id': self.element_id, 'live': LIVE_HINT}}</script>"
            "</div>"
        )
        if not full_page:
            return body
        return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>{html.escape(self.title)}</title></head><body>{body}</body></html>")

    def _repr_html_(self) -> str:
        return self.to_html()

    def __repr__(self) -> str:  # the text a notebook stores beside the HTML: the same every run
        return f"AttentionExplorer({self.title!r}, {len(self.views)} view(s))"

    # -- the static picture ---------------------------------------------------------------------

    def plot(self, view: int = 0, layer: int = 0):
        """A static figure of one view and layer: every head's full attention matrix (cividis),
        for viewers that run no script. Returns the matplotlib figure."""
        import matplotlib.pyplot as plt

        data = self._data[view]
        maps = np.asarray(data["maps"][layer])  # (heads, n_q, n_k)
        heads = maps.shape[0]
        fig, axes = plt.subplots(1, heads, figsize=(3.2 * heads, 3.0), squeeze=False)
        for head, ax in enumerate(axes[0]):
            ax.imshow(maps[head], cmap="cividis", vmin=0, vmax=1, interpolation="nearest")
            ax.set_title(f"{data['name']}\nlayer {layer}, head {head}", fontsize=8)
            n_q, n_k = maps.shape[1:]
            if n_k <= 20:
                ax.set_xticks(range(n_k), data["keys"], rotation=90, fontsize=7)
            if n_q <= 20:
                ax.set_yticks(range(n_q), data["queries"], fontsize=7)
            ax.set_xlabel("key", fontsize=8)
            ax.set_ylabel("query", fontsize=8)
        fig.tight_layout()
        return fig

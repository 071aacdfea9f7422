r"""Positional encodings (位置编码): telling self-attention *where* each vector is.

Self-attention on its own is permutation-equivariant: shuffle the input vectors and the outputs
are shuffled the same way, so it cannot tell "机器学习" from "学习机器". The lecture's fix: give
each position :math:`i` a unique vector :math:`e^i` and add it to the input,
:math:`a^i \leftarrow a^i + e^i`. This module holds the encodings of section 03:

* :func:`sinusoidal_encoding` / :class:`SinusoidalEncoding`: the fixed table of Vaswani et al.
  (2017, §3.5), added to the inputs;
* :class:`LearnedPositionalEmbedding`: one trained vector per position (BERT, GPT-2), added;
* :func:`apply_rotary` / :class:`RotaryEmbedding` / :class:`RotarySelfAttention`: rotary
  position embedding (RoPE, Su et al. 2021), which rotates queries and keys instead of adding
  anything, so that attention scores depend only on the *offset* between two positions.

All of it is derived in ``03_positional_encoding.ipynb``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .attention import KeyValueCache, MultiHeadAttention
from .utils import (
    at_boundary,
    check_device,
    check_positive_float,
    check_positive_int,
    check_tensor,
    inside_library,
)

__all__ = [
    "sinusoidal_encoding",
    "SinusoidalEncoding",
    "LearnedPositionalEmbedding",
    "rotary_angles",
    "apply_rotary",
    "RotaryEmbedding",
    "RotarySelfAttention",
]

BASE = 10000.0  # the paper's base: wavelengths run from 2*pi to 10000 * 2*pi


def _check_base(base: object) -> float:
    if isinstance(base, bool) or not isinstance(base, (int, float)):
        raise TypeError(f"base must be a number, got {type(base).__name__} ({base!r})")
    if not (math.isfinite(base) and base > 1):
        raise ValueError(f"base must be a finite number > 1, got {base!r}")
    return float(base)


# ---------------------------------------------------------------------------------------------
# Sinusoidal encoding (added to the inputs)
# ---------------------------------------------------------------------------------------------


def sinusoidal_encoding(
    n_positions: int,
    d_model: int,
    *,
    base: float = BASE,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""The ``(n_positions, d_model)`` table of sinusoidal positional encodings.

    Row ``pos`` is the vector :math:`e^{pos}` added to the input at position ``pos``
    (positions count from 0). Feature pairs ``(2i, 2i+1)`` share one frequency
    :math:`\omega_i`:

    .. math::
        PE_{pos,\,2i} = \sin(pos\,\omega_i), \qquad PE_{pos,\,2i+1} = \cos(pos\,\omega_i),
        \qquad \omega_i = \frac{1}{\text{base}^{2i/d_{model}}}

    so the wavelengths :math:`2\pi / \omega_i` grow geometrically from :math:`2\pi` to almost
    :math:`\text{base}\cdot 2\pi`. For an odd ``d_model`` the last feature is a lone ``sin``.

    Because each pair is a point on a circle turning at its own speed,
    :math:`PE_{pos+k} = R_k\, PE_{pos}` for a block-diagonal rotation :math:`R_k` that does not
    depend on ``pos``, and :math:`PE_{pos} \cdot PE_{pos+k} = \sum_i \cos(k\,\omega_i)`
    depends only on the offset ``k`` (even ``d_model``).

    The angles are computed in float64 and the result cast to ``dtype``, so large positions stay
    accurate in float32. Derived in ``03_positional_encoding.ipynb``.
    """
    n_positions = check_positive_int(n_positions, "n_positions")
    d_model = check_positive_int(d_model, "d_model")
    base = _check_base(base)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    device = check_device(device)
    positions = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (n_positions, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(d/2),): 0, 2, 4, ...
    frequencies = base ** (-two_i / d_model)  # (ceil(d/2),): omega_i
    angles = positions * frequencies  # (n_positions, ceil(d/2)): pos * omega_i
    table = torch.empty(n_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)  # even features 2i
    table[:, 1::2] = torch.cos(angles[:, : d_model // 2])  # odd features 2i+1 (one fewer if d odd)
    return table.to(device=device, dtype=dtype)


class SinusoidalEncoding(nn.Module):
    r"""Adds the sinusoidal table to ``x``: :math:`a^i + e^i` for every position ``i``.

    Args:
        d_model: size of the input vectors (last dimension of ``x``).
        max_len: the longest sequence it accepts; the table is precomputed up to it.

    ``forward(x)``: ``x`` ``(batch, seq, d_model)`` with ``seq <= max_len`` ->
    ``x + PE[:seq]`` of the same shape and dtype. Nothing here is learned.

    The table is a **non-persistent buffer**: it is derived from a formula, not learned, so it
    does not need to be saved in (or loaded from) a ``state_dict``, yet as a buffer it still
    follows the module in ``.to(device)`` / ``.double()``, unlike a plain attribute. Reading
    an old checkpoint or changing ``max_len`` therefore never trips over a stored table.
    Derived in ``03_positional_encoding.ipynb``.
    """

    table: torch.Tensor

    def __init__(self, d_model: int, max_len: int = 512) -> None:
        super().__init__()
        self.d_model = check_positive_int(d_model, "d_model")
        self.max_len = check_positive_int(max_len, "max_len")
        table = sinusoidal_encoding(self.max_len, self.d_model)  # (max_len, d_model)
        self.register_buffer("table", table, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if at_boundary():
            check_tensor(x, "x", ndim=3, dtype="floating")
            if x.shape[-1] != self.d_model:
                raise ValueError(
                    f"x must have shape (batch, seq, d_model={self.d_model}), got {tuple(x.shape)}"
                )
            if x.shape[1] > self.max_len:
                raise ValueError(
                    f"x has {x.shape[1]} positions (shape {tuple(x.shape)}) but this "
                    f"SinusoidalEncoding was built with max_len={self.max_len}: build it with a "
                    "larger max_len"
                )
        seq = x.shape[1]
        return x + self.table[:seq].to(x.dtype)  # (batch, seq, d_model) + (seq, d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}"


# ---------------------------------------------------------------------------------------------
# Learned positional embedding (added to the inputs)
# ---------------------------------------------------------------------------------------------


class LearnedPositionalEmbedding(nn.Module):
    r"""One trained vector per position, added to the input: :math:`a^i + E[i]`.

    Args:
        max_len: number of positions it has a vector for (positions ``0 ... max_len - 1``).
        d_model: size of each vector. The argument order follows ``nn.Embedding(num, dim)``.
        init_std: standard deviation of the initial vectors. The default 1.0 is
            ``nn.Embedding``'s, the scale of the token vectors they are added to; BERT and GPT-2
            use 0.02 for both tables. Keep the two at the same scale: a table 50 times smaller
            than the tokens it is added to is learned very slowly.

    ``forward(x)``: ``x`` ``(batch, seq, d_model)`` -> ``x + E[:seq]``. A sequence longer than
    ``max_len`` raises: there is simply no vector for those positions. And a row that no
    training sequence ever reached keeps its random initial value: learned embeddings have no
    rule that extends to unseen positions (``03`` measures it).
    Derived in ``03_positional_encoding.ipynb``.
    """

    def __init__(self, max_len: int, d_model: int, init_std: float = 1.0) -> None:
        super().__init__()
        self.max_len = check_positive_int(max_len, "max_len")
        self.d_model = check_positive_int(d_model, "d_model")
        init_std = check_positive_float(init_std, "init_std")
        self.embedding = nn.Embedding(self.max_len, self.d_model)  # E: (max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=init_std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_tensor(x, "x", ndim=3, dtype="floating")
        batch, seq, d_model = x.shape
        if d_model != self.d_model:
            raise ValueError(
                f"x must have shape (batch, seq, d_model={self.d_model}), got {tuple(x.shape)}"
            )
        if seq > self.max_len:
            raise ValueError(
                f"x has {seq} positions (shape {tuple(x.shape)}) but this "
                f"LearnedPositionalEmbedding only has vectors for max_len={self.max_len} "
                "positions; a learned table cannot be extended to positions it never had"
            )
        positions = torch.arange(seq, device=x.device)  # (seq,)
        return x + self.embedding(positions).to(x.dtype)  # (batch, seq, d_model) + (seq, d_model)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"


# ---------------------------------------------------------------------------------------------
# Rotary position embedding (RoPE): rotate queries and keys
# ---------------------------------------------------------------------------------------------


def rotary_angles(
    positions: torch.Tensor, d_head: int, base: float = BASE, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    r"""Angles :math:`m\,\theta_i` with :math:`\theta_i = \text{base}^{-2i/d_{head}}`.

    ``positions``: any shape ``(...)`` of integer or float positions :math:`m`;
    returns ``(..., d_head // 2)``, computed in float64 when ``dtype`` is float64 and in float32
    otherwise (half precision would lose whole radians at large positions); take cos/sin first,
    then cast. The same frequencies :math:`\theta_i = \omega_i` as the sinusoidal table.
    """
    d_head = check_positive_int(d_head, "d_head")
    if d_head % 2:
        raise ValueError(
            f"rotary embedding rotates feature pairs: d_head must be even, got {d_head}"
        )
    base = _check_base(base)
    if at_boundary():
        _check_position_values(positions)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    compute = torch.float64 if dtype == torch.float64 else torch.float32
    two_i = torch.arange(0, d_head, 2, dtype=compute, device=positions.device)  # (d_head/2,)
    frequencies = base ** (-two_i / d_head)  # (d_head/2,): theta_i
    return positions.to(compute)[..., None] * frequencies  # (..., d_head/2)


def _check_position_values(positions: object) -> torch.Tensor:
    """Positions: an integer or floating tensor of finite values."""
    check_tensor(positions, "positions")
    if positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(f"positions must be integer or float, got {positions.dtype}")
    if positions.is_floating_point() and not bool(torch.isfinite(positions).all()):
        raise ValueError("positions must be finite numbers, got NaN or inf")
    return positions


def _rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each feature pair ``(x[2i], x[2i+1])`` by the angle whose cos/sin are given."""
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (..., seq, d_head/2) each
    rotated_even = x_even * cos - x_odd * sin
    rotated_odd = x_even * sin + x_odd * cos
    return torch.stack((rotated_even, rotated_odd), dim=-1).flatten(-2)  # (..., seq, d_head)


def apply_rotary(
    x: torch.Tensor, positions: torch.Tensor | None = None, base: float = BASE
) -> torch.Tensor:
    r"""Rotary position embedding: rotate feature pair ``i`` of the vector at position ``m`` by
    the angle :math:`m\,\theta_i`, :math:`\theta_i = \text{base}^{-2i/d_{head}}`.

    .. math::
        \begin{pmatrix} x'_{2i} \\ x'_{2i+1} \end{pmatrix} =
        \begin{pmatrix} \cos m\theta_i & -\sin m\theta_i \\ \sin m\theta_i & \cos m\theta_i
        \end{pmatrix}
        \begin{pmatrix} x_{2i} \\ x_{2i+1} \end{pmatrix}
        \quad\text{i.e.}\quad z'_i = z_i\, e^{\mathrm{i}\, m\theta_i}
        \text{ with } z_i = x_{2i} + \mathrm{i}\, x_{2i+1}.

    Applied to queries and keys (never to values), it gives
    :math:`(R_m q)\cdot(R_n k) = q^\top R_{n-m}\, k`: the score depends on the offset
    :math:`n - m` and the contents, not on the absolute positions. Rotations keep norms.

    Args:
        x: ``(..., seq, d_head)`` with ``d_head`` even, e.g. ``(batch, heads, seq, d_head)``.
        positions: the position ``m`` of each vector, shape ``(seq,)`` or any shape that
            broadcasts to ``x.shape[:-1]`` without enlarging it; default ``0 ... seq-1``.
        base: the frequency base (10000 as in the sinusoidal table and the RoFormer paper).

    Returns the rotated tensor, same shape and dtype as ``x``. Pairs are interleaved
    (``2i, 2i+1``) as in the paper; some libraries pair feature ``i`` with ``i + d/2`` instead.
    Derived in ``03_positional_encoding.ipynb``.
    """
    check_tensor(x, "x", dtype="floating")
    if x.dim() < 2:
        raise ValueError(f"x must have shape (..., seq, d_head), got {tuple(x.shape)}")
    d_head = x.shape[-1]
    if d_head % 2:
        raise ValueError(
            f"rotary embedding rotates feature pairs: the last dimension of x must be even, "
            f"got shape {tuple(x.shape)}"
        )
    seq = x.shape[-2]
    if positions is None:
        positions = torch.arange(seq, device=x.device)  # (seq,)
    else:
        _check_position_values(positions)
        try:
            ok = torch.broadcast_shapes(positions.shape, x.shape[:-1]) == x.shape[:-1]
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(
                f"positions of shape {tuple(positions.shape)} must broadcast to "
                f"x.shape[:-1] = {tuple(x.shape[:-1])} (one position per vector of x)"
            )
    with inside_library():  # positions and base were checked above
        angles = rotary_angles(positions.to(x.device), d_head, base, x.dtype)  # (..., d_head/2)
    return _rotate_pairs(x, torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype))


class RotaryEmbedding(nn.Module):
    r"""Rotary position embedding with cached ``cos``/``sin`` tables (see :func:`apply_rotary`).

    Args:
        d_head: size of each query/key vector; must be even.
        max_len: positions ``0 ... max_len - 1`` are precomputed. Longer inputs still work (the
            angles are then computed on the fly): a rotation exists for every position.
        base: the frequency base (10000).

    ``forward(x, positions=None)``: ``x`` ``(..., seq, d_head)`` -> rotated, same shape.
    The tables are non-persistent buffers: derived from a formula, so not saved in
    ``state_dict``, but they follow ``.to(device)``. Derived in ``03_positional_encoding.ipynb``.
    """

    cos_table: torch.Tensor
    sin_table: torch.Tensor

    def __init__(self, d_head: int, max_len: int = 2048, base: float = BASE) -> None:
        super().__init__()
        self.d_head = check_positive_int(d_head, "d_head")
        if self.d_head % 2:
            raise ValueError(
                f"rotary embedding rotates feature pairs: d_head must be even, got {d_head}"
            )
        self.max_len = check_positive_int(max_len, "max_len")
        self.base = _check_base(base)
        positions = torch.arange(self.max_len)  # (max_len,)
        angles = rotary_angles(positions, self.d_head, self.base, torch.float64)
        # angles: (max_len, d_head/2)
        self.register_buffer("cos_table", torch.cos(angles).float(), persistent=False)
        self.register_buffer("sin_table", torch.sin(angles).float(), persistent=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        if at_boundary():
            check_tensor(x, "x", dtype="floating")
            if x.dim() < 2 or x.shape[-1] != self.d_head:
                raise ValueError(
                    f"x must have shape (..., seq, d_head={self.d_head}), got {tuple(x.shape)}"
                )
        seq = x.shape[-2]
        if positions is not None or seq > self.max_len or x.dtype == torch.float64:
            return apply_rotary(x, positions, self.base)  # angles computed on the fly
        cos = self.cos_table[:seq].to(x.dtype)  # (seq, d_head/2)
        sin = self.sin_table[:seq].to(x.dtype)  # (seq, d_head/2)
        return _rotate_pairs(x, cos, sin)

    def extra_repr(self) -> str:
        return f"d_head={self.d_head}, max_len={self.max_len}, base={self.base:g}"


class RotarySelfAttention(MultiHeadAttention):
    r"""Multi-head attention with rotary position embedding on queries and keys.

    The same module as :class:`~lectures_lib.attention.MultiHeadAttention` (same parameters, same
    ``forward``), changed in one step only, as RoFormer changes the Transformer: it overrides
    :meth:`project`, so that after the projections each head's queries and keys are rotated,

    .. math::
        \alpha_{m,n} = \frac{(R_m\, q_m)\cdot(R_n\, k_n)}{\sqrt{d_{head}}}
        = \frac{q_m^\top R_{n-m}\, k_n}{\sqrt{d_{head}}},

    so scores see offsets, never absolute positions, and no vector is added to the inputs.
    It is an attention factory: ``EncoderTagger(..., attention=RotarySelfAttention)``.

    Args:
        d_model, num_heads, dropout, bias: as in ``MultiHeadAttention``; ``d_model / num_heads``
            must be even.
        max_len: positions precomputed by the :class:`RotaryEmbedding` (longer inputs work too).
        base: the frequency base (10000).

    ``forward(query, key, value, mask=None, need_weights=True, *, positions=None)``: as
    ``MultiHeadAttention``; query ``m`` sits at position ``m`` and key ``n`` at position ``n``
    (``0 ... seq-1``) unless ``positions`` gives one position per token, ``(seq,)`` or
    ``(batch, seq)``, used for queries and keys alike (self-attention). With all positions equal
    nothing is rotated and it equals ``MultiHeadAttention``. Derived in
    ``03_positional_encoding.ipynb``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        max_len: int = 2048,
        base: float = BASE,
    ) -> None:
        super().__init__(d_model, num_heads, dropout=dropout, bias=bias)
        if self.d_head % 2:
            raise ValueError(
                f"rotary attention needs an even d_head = d_model / num_heads, got "
                f"d_model={d_model}, num_heads={num_heads} (d_head={self.d_head})"
            )
        self.rotary = RotaryEmbedding(self.d_head, max_len=max_len, base=base)
        self._positions: torch.Tensor | None = None  # set by forward(positions=...) for project

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = True,
        *,
        positions: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if positions is not None:
            if at_boundary():
                self._check_positions(positions, query, key)
            if positions.dim() == 2:
                positions = positions[:, None, :]  # (batch, 1, seq): the same for every head
        self._positions = positions
        try:
            return super().forward(query, key, value, mask, need_weights)
        finally:
            self._positions = None

    #: With a key/value cache the new token at position t is rotated by R_t (forward_cached
    #: below) and the cached keys were rotated at their own positions: exact, tested.
    supports_kv_cache = True

    def forward_cached(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        cache: KeyValueCache,
        mask: torch.Tensor | None = None,
        *,
        static: bool = False,
    ) -> torch.Tensor:
        """``MultiHeadAttention.forward_cached`` with the new tokens at positions ``len(cache)
        ... len(cache) + n_new - 1`` (not ``0 ...``): queries and keys rotated where they sit."""
        if static:
            raise ValueError(
                "RotarySelfAttention is self-attention: it cannot attend to a static memory "
                "(cross-attention) with a cache"
            )
        start = len(cache)
        self._positions = torch.arange(start, start + query.shape[1], device=query.device)
        try:
            return super().forward_cached(query, key, value, cache, mask)
        finally:
            self._positions = None

    def _check_positions(self, positions: object, query: object, key: object) -> None:
        check_tensor(positions, "positions", ndim=(1, 2))
        _check_position_values(positions)
        check_tensor(query, "query", ndim=3)
        check_tensor(key, "key", ndim=3)
        batch, seq = query.shape[0], query.shape[1]
        if key.shape[1] != seq:
            raise ValueError(
                "positions=... gives one position per token of a self-attention: query and key "
                f"must have the same length, got {tuple(query.shape)} and {tuple(key.shape)}"
            )
        wrong_batch = positions.dim() == 2 and positions.shape[0] not in (1, batch)
        if positions.shape[-1] != seq or wrong_batch:
            raise ValueError(
                f"positions must have shape (seq,) or (batch, seq) = ({batch}, {seq}), "
                f"got {tuple(positions.shape)}"
            )

    def project(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """MultiHeadAttention's projections, then :math:`R_m q_m` and :math:`R_n k_n` per head
        (values are not rotated)."""
        queries, keys, values = super().project(query, key, value)  # (batch, heads, n, d_head)
        queries = self.rotary(queries, self._positions)  # R_m q_m, same shape
        keys = self.rotary(keys, self._positions)  # R_n k_n, same shape
        return queries, keys, values

    @classmethod
    def from_torch(  # type: ignore[override]
        cls, module: nn.MultiheadAttention, max_len: int = 2048, base: float = BASE
    ) -> RotarySelfAttention:
        """PyTorch's (unrotated) self-attention weights in a rotary module.

        Copies every projection of ``module`` (which must be a self-attention: no separate
        ``kdim``/``vdim``); the result differs from ``module`` only by the rotation, so with all
        positions equal it gives the same outputs. Mask conventions as in
        :meth:`MultiHeadAttention.from_torch` (pass ``~torch_mask``).
        """
        plain = MultiHeadAttention.from_torch(module)
        if plain.kdim != plain.d_model or plain.vdim != plain.d_model:
            raise ValueError(
                "RotarySelfAttention is self-attention: kdim and vdim must equal embed_dim, got "
                f"embed_dim={plain.d_model}, kdim={plain.kdim}, vdim={plain.vdim}"
            )
        ours = cls(
            plain.d_model,
            plain.num_heads,
            dropout=plain.dropout,
            bias=plain.q_proj.bias is not None,
            max_len=max_len,
            base=base,
        )
        weight = plain.q_proj.weight
        ours = ours.to(device=weight.device, dtype=weight.dtype)
        ours.load_state_dict(plain.state_dict())  # rotary tables are non-persistent: not needed
        ours.train(module.training)
        return ours

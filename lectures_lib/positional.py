r"""Positional encodings (位置编码): telling self-attention *where* each vector is.

Self-attention on its own is permutation-equivariant: shuffle the input vectors and the outputs
are shuffled the same way, so it cannot tell "机器学习" from "学习机器". The lecture's fix: give
each position :math:`i` a unique vector :math:`e^i` and add it to the input,
:math:`a^i \leftarrow a^i + e^i`. This module holds the encodings of section 03:

* :func:`sinusoidal_encoding` / :class:`SinusoidalEncoding`: the fixed table of Vaswani et al.
  (2017, §3.5), added to the inputs;
* :class:`LearnedPositionalEmbedding`: one trained vector per position (BERT, GPT-2), added;
* :func:`apply_rotary` / :class:`RotaryEmbedding` / :class:`RotaryAttention`: rotary
  position embedding (RoPE, Su et al. 2021), which rotates queries and keys instead of adding
  anything, so that attention scores depend only on the *offset* between two positions.

All of it is derived in ``03_positional_encoding.ipynb``.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from ._validate import positional as rules
from ._validate.settings import check_settings
from .attention import MultiHeadAttention
from .utils import validated

__all__ = [
    "sinusoidal_encoding",
    "SinusoidalEncoding",
    "LearnedPositionalEmbedding",
    "rotary_angles",
    "apply_rotary",
    "RotaryEmbedding",
    "RotaryAttention",
    "RotarySelfAttention",
]

BASE = 10000.0  # the paper's base: wavelengths run from 2*pi to 10000 * 2*pi


# ---------------------------------------------------------------------------------------------
# Sinusoidal encoding (added to the inputs)
# ---------------------------------------------------------------------------------------------


@validated(rules.sinusoidal_table_args)
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
        check_settings(d_model=d_model, max_len=max_len)
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        table = sinusoidal_encoding(self.max_len, self.d_model)  # (max_len, d_model)
        self.register_buffer("table", table, persistent=False)

    @validated(rules.within_table)
    def forward(self, x: torch.Tensor) -> torch.Tensor:
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
        check_settings(max_len=max_len, d_model=d_model, init_std=init_std)
        super().__init__()
        self.max_len, self.d_model = max_len, d_model
        self.embedding = nn.Embedding(self.max_len, self.d_model)  # E: (max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=init_std)

    @validated(rules.within_table)
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[1], device=x.device)  # (seq,)
        return x + self.embedding(positions).to(x.dtype)  # (batch, seq, d_model) + (seq, d_model)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"


# ---------------------------------------------------------------------------------------------
# Rotary position embedding (RoPE): rotate queries and keys
# ---------------------------------------------------------------------------------------------


@validated(rules.rotary_angle_args)
def rotary_angles(
    positions: torch.Tensor, d_head: int, base: float = BASE, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    r"""Angles :math:`m\,\theta_i` with :math:`\theta_i = \text{base}^{-2i/d_{head}}`.

    ``positions``: any shape ``(...)`` of integer or float positions :math:`m`;
    returns ``(..., d_head // 2)``, computed in float64 when ``dtype`` is float64 and in float32
    otherwise (half precision would lose whole radians at large positions); take cos/sin first,
    then cast. The same frequencies :math:`\theta_i = \omega_i` as the sinusoidal table.
    """
    compute = torch.float64 if dtype == torch.float64 else torch.float32
    two_i = torch.arange(0, d_head, 2, dtype=compute, device=positions.device)  # (d_head/2,)
    frequencies = base ** (-two_i / d_head)  # (d_head/2,): theta_i
    return positions.to(compute)[..., None] * frequencies  # (..., d_head/2)


def _rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each feature pair ``(x[2i], x[2i+1])`` by the angle whose cos/sin are given."""
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (..., seq, d_head/2) each
    rotated_even = x_even * cos - x_odd * sin
    rotated_odd = x_even * sin + x_odd * cos
    return torch.stack((rotated_even, rotated_odd), dim=-1).flatten(-2)  # (..., seq, d_head)


@validated(rules.rotatable_x)
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
    if positions is None:
        positions = torch.arange(x.shape[-2], device=x.device)  # (seq,): 0 ... seq-1
    angles = rotary_angles(positions.to(x.device), x.shape[-1], base, x.dtype)  # (..., d_head/2)
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
        check_settings(d_head=d_head, max_len=max_len, base=base)
        super().__init__()
        self.d_head, self.max_len, self.base = d_head, max_len, float(base)
        positions = torch.arange(self.max_len)  # (max_len,)
        angles = rotary_angles(positions, self.d_head, self.base, torch.float64)
        # angles: (max_len, d_head/2)
        self.register_buffer("cos_table", torch.cos(angles).float(), persistent=False)
        self.register_buffer("sin_table", torch.sin(angles).float(), persistent=False)

    @validated(rules.rotary_module_inputs)
    def forward(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        seq = x.shape[-2]
        if positions is not None or seq > self.max_len or x.dtype == torch.float64:
            return apply_rotary(x, positions, self.base)  # angles computed on the fly
        cos = self.cos_table[:seq].to(x.dtype)  # (seq, d_head/2)
        sin = self.sin_table[:seq].to(x.dtype)  # (seq, d_head/2)
        return _rotate_pairs(x, cos, sin)

    def extra_repr(self) -> str:
        return f"d_head={self.d_head}, max_len={self.max_len}, base={self.base:g}"


class RotaryAttention(MultiHeadAttention):
    r"""Multi-head attention with rotary position embedding on queries and keys.

    The same module as :class:`~lectures_lib.attention.MultiHeadAttention` (same parameters, same
    ``forward``), changed in one step only, as RoFormer changes the Transformer: it overrides
    :meth:`project`, so that after the projections each head's queries and keys are rotated,

    .. math::
        \alpha_{m,n} = \frac{(R_m\, q_m)\cdot(R_n\, k_n)}{\sqrt{d_{head}}}
        = \frac{q_m^\top R_{n-m}\, k_n}{\sqrt{d_{head}}},

    so scores see offsets, never absolute positions, and no vector is added to the inputs.
    It is an attention factory: ``EncoderTagger(..., attention=RotaryAttention)`` (which then
    adds no sinusoidal table: see ``positional_encoding``).

    Args:
        d_model, num_heads, dropout, bias: as in ``MultiHeadAttention``; ``d_model / num_heads``
            must be even.
        max_len: positions precomputed by the :class:`RotaryEmbedding` (longer inputs work too).
        base: the frequency base (10000).

    ``forward(query, key, value, mask=None, need_weights=True, *, positions=None)``: as
    ``MultiHeadAttention``; query ``m`` sits at position ``m`` and key ``n`` at position ``n``
    (``0 ... seq-1``) unless ``positions`` gives one position per token, ``(seq,)`` or
    ``(batch, seq)``, used for queries and keys alike (self-attention). The positions come
    through the seam as an argument (``forward`` hands them to :meth:`project`;
    ``forward_cached`` hands it the cache offset), as x-transformers passes ``rotary_pos_emb``
    down its stack. With all positions equal nothing is rotated and it equals
    ``MultiHeadAttention``. Derived in ``03_positional_encoding.ipynb``.
    """

    #: The new token at position t is rotated by R_t (forward_cached passes the cache offset)
    #: and the cached keys were rotated at their own positions: exact, tested.
    supports_kv_cache = True
    #: Positions are per token of one sequence: no cached cross-attention to a static memory.
    self_attention_only = True

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
        rules.rotary_heads(self, max_len, base)
        self.rotary = RotaryEmbedding(self.d_head, max_len=max_len, base=base)

    def project(self, query, key, value, positions=None):
        """MultiHeadAttention's projections, then :math:`R_m q_m` and :math:`R_n k_n` per head
        (values are not rotated); ``positions`` ``(seq,)`` or ``(batch, seq)``, default
        ``0 ... seq-1``."""
        queries, keys, values = super().project(query, key, value)  # (batch, heads, n, d_head)
        if positions is not None and positions.dim() == 2:
            positions = positions[:, None, :]  # (batch, 1, seq): the same for every head
        queries = self.rotary(queries, positions)  # R_m q_m, same shape
        keys = self.rotary(keys, positions)  # R_n k_n, same shape
        return queries, keys, values

    @classmethod
    def from_torch(  # type: ignore[override]
        cls, module: nn.MultiheadAttention, max_len: int = 2048, base: float = BASE
    ) -> RotaryAttention:
        """PyTorch's (unrotated) self-attention weights in a rotary module.

        Copies every projection of ``module`` (which must be a self-attention: no separate
        ``kdim``/``vdim``); the result differs from ``module`` only by the rotation, so with all
        positions equal it gives the same outputs. Mask conventions as in
        :meth:`MultiHeadAttention.from_torch` (pass ``~torch_mask``).
        """
        plain = MultiHeadAttention.from_torch(module)
        rules.self_attention_only(plain, cls.__name__)
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


class RotarySelfAttention(RotaryAttention):
    """Deprecated alias of :class:`RotaryAttention` (it is multi-head attention, used for
    self-attention); kept for one release. Building one warns with a ``DeprecationWarning``."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        warnings.warn(
            "RotarySelfAttention is renamed RotaryAttention (the same module); the old name "
            "goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        super().__init__(*args, **kwargs)

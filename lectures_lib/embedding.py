r"""Token embeddings: token ids -> vectors, scaled, plus the positional encoding.

Derived in ``04_transformer_encoder.ipynb``; the models of :mod:`lectures_lib.models` (which also
exports :class:`TokenEmbedding`) embed their source and target tokens with it.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._validate import embedding as rules
from .positional import SinusoidalEncoding
from .utils import validated

__all__ = ["TokenEmbedding"]


class TokenEmbedding(nn.Module):
    r"""Token ids -> vectors: embedding lookup scaled by :math:`\sqrt{d_{model}}`, plus the
    sinusoidal positional encoding (位置编码), then dropout.

    The lookup ``E[token]`` is the one-hot vector times the matrix ``E`` (``04`` shows it). The
    paper multiplies embeddings by :math:`\sqrt{d_{model}}`; the embedding matrix is initialised
    with standard deviation :math:`d_{model}^{-1/2}` so the scaled vectors have entries of size
    about 1, like the positional encoding they are added to.

    Args: ``vocab_size``, ``d_model``, ``max_len`` (longest sequence), ``dropout``, ``pad_id``
    (its row starts at zero and gets no gradient; None for no padding token),
    ``positional_encoding`` (add the sinusoidal table; ``False`` when the attention brings its own
    positions, e.g. :class:`~lectures_lib.positional.RotaryAttention`).
    Derived in ``04_transformer_encoder.ipynb``.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        max_len: int = 256,
        dropout: float = 0.0,
        pad_id: int | None = 0,
        *,
        positional_encoding: bool = True,
    ) -> None:
        rules.embedding_sizes(vocab_size, d_model, max_len, dropout, pad_id, positional_encoding)
        super().__init__()
        self.vocab_size, self.d_model, self.max_len, self.pad_id = vocab_size, d_model, max_len, pad_id
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.positional = SinusoidalEncoding(d_model, max_len) if positional_encoding else None
        self.dropout = nn.Dropout(dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.embedding.weight, std=self.d_model**-0.5)
        if self.pad_id is not None:
            with torch.no_grad():
                self.embedding.weight[self.pad_id].zero_()

    #: ``check_inputs(tokens, name="tokens")``: integer ids ``(batch, seq)`` in the vocabulary,
    #: at most ``max_len`` long (the models check their token inputs with it).
    check_inputs = rules.embedding_inputs

    @validated(rules.embedding_offset_inputs)
    def forward(self, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """``tokens`` ``(batch, seq)`` int64 ids -> ``(batch, seq, d_model)``.

        ``offset``: the position of the first token (incremental decoding feeds token ``t``
        alone, at position ``t``).
        """
        vectors = self.embedding(tokens) * math.sqrt(self.d_model)  # (batch, seq, d_model)
        if self.positional is not None:  # + PE[offset : offset + seq]
            table = self.positional.table[offset : offset + tokens.shape[1]]  # (seq, d_model)
            vectors = vectors + table.to(vectors.dtype)
        return self.dropout(vectors)

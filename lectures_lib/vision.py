r"""A small vision Transformer (ViT) on the course's own encoder, and the two classic baselines.

:class:`PatchClassifier` reads an image as the set of its patches (图块, see
:mod:`lectures_lib.data.digits`): each flattened patch :math:`p_i \in \mathbb{R}^{P^2}` becomes a
token vector by one linear map (the image counterpart of the word embedding), a learned
position vector is added, a learned **class token** ``[CLS]`` is put in front, and the
course's :class:`~lectures_lib.models.Encoder` (its layers built by the attention factory, so
every variant of 06 drops in) mixes the patches; the class token's output gives the logits:

.. math::
    z_0 = [\,x_{cls};\; p_1 E;\; \dots;\; p_N E\,] + E_{pos},\qquad
    z_L = \operatorname{Encoder}(z_0),\qquad \hat y = \operatorname{softmax}(z_L^{cls} W)

``pooling="mean"`` averages the patch outputs instead of keeping a class token.
``positional_encoding=False`` leaves out :math:`E_{pos}`: the model then sees a *set* of
patches with no order, a bag of patches (the permutation-equivariance of 03, on images).

:class:`PixelMLP` (the image flattened into one vector, a fully connected network) and
:class:`SmallCNN` (two 3×3 convolutions: a fixed receptive field, the lecture's "CNN is a
self-attention with a restricted receptive field") are the baselines on the same split.
Derived in ``04_transformer_encoder.ipynb``.
"""

from __future__ import annotations

import torch
from torch import nn

from .layers import AttentionFactory, EncoderLayer
from .models import Encoder
from .utils import (
    at_boundary,
    check_bool,
    check_positive_int,
    check_tensor,
    eval_mode,
    inside_library,
)

__all__ = ["PatchClassifier", "PixelMLP", "SmallCNN"]

POOLINGS = ("cls", "mean")


class PatchClassifier(nn.Module):
    """A ViT: patches ``(batch, n_patches, patch_dim)`` -> logits ``(batch, num_classes)``.

    Args: ``n_patches`` and ``patch_dim`` (the input's last two sizes), ``num_classes``,
    ``d_model``, ``num_heads``, ``num_layers``, ``d_ff``, ``dropout`` (in every layer); ``pooling`` ``"cls"`` (a class token,
    as ViT) or ``"mean"`` (average of the patch outputs); ``norm_first`` (default Pre-LN, as ViT;
    the encoder then ends with a LayerNorm); ``positional_encoding`` (learned position vectors);
    ``attention``: the attention factory of every layer (None = ``MultiHeadAttention``).

    :meth:`attention_maps` returns every layer's weights ``(layers, batch, heads, n, n)`` with
    ``n = n_patches + 1`` for ``pooling="cls"`` (token 0 is the class token) and ``n_patches``
    for ``"mean"``.
    """

    def __init__(
        self,
        n_patches: int,
        patch_dim: int,
        num_classes: int,
        d_model: int = 32,
        num_heads: int = 2,
        num_layers: int = 2,
        d_ff: int = 64,
        dropout: float = 0.0,
        *,
        pooling: str = "cls",
        norm_first: bool = True,
        positional_encoding: bool = True,
        attention: AttentionFactory | None = None,
    ) -> None:
        super().__init__()
        self.n_patches = check_positive_int(n_patches, "n_patches")
        self.patch_dim = check_positive_int(patch_dim, "patch_dim")
        self.num_classes = check_positive_int(num_classes, "num_classes")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.pooling = pooling
        check_bool(norm_first, "norm_first")
        check_bool(positional_encoding, "positional_encoding")
        self.patch_embed = nn.Linear(patch_dim, d_model)  # p_i E: one token vector per patch
        n_tokens = n_patches + (pooling == "cls")
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model)) if pooling == "cls" else None
        self.position = (
            nn.Parameter(torch.randn(1, n_tokens, d_model) * 0.02) if positional_encoding else None
        )
        self.encoder = Encoder(
            lambda: EncoderLayer(
                d_model, num_heads, d_ff, dropout, norm_first=norm_first, attention=attention
            ),
            num_layers,
        )
        self.head = nn.Linear(d_model, num_classes)

    def check_inputs(self, patches: object) -> None:
        check_tensor(patches, "patches", ndim=3, dtype="floating")
        expected = (self.n_patches, self.patch_dim)
        if tuple(patches.shape[1:]) != expected:
            raise ValueError(
                f"patches must have shape (batch, {expected[0]}, {expected[1]}) "
                f"(batch, n_patches, patch_dim), got {tuple(patches.shape)}"
            )

    def tokens(self, patches: torch.Tensor) -> torch.Tensor:
        """The encoder's input ``z_0`` ``(batch, n_tokens, d_model)``."""
        z = self.patch_embed(patches)  # (batch, n_patches, d_model)
        if self.cls_token is not None:
            cls = self.cls_token.expand(z.shape[0], -1, -1)  # (batch, 1, d_model)
            z = torch.cat([cls, z], dim=1)  # (batch, 1 + n_patches, d_model)
        if self.position is not None:
            z = z + self.position  # learned position vector of each token
        return z

    def forward(self, patches: torch.Tensor) -> torch.Tensor:
        if at_boundary():
            self.check_inputs(patches)
        with inside_library():  # the encoder's own checks are met by construction
            hidden = self.encoder(self.tokens(patches))  # (batch, n_tokens, d_model)
        pooled = hidden[:, 0] if self.pooling == "cls" else hidden.mean(dim=1)  # (batch, d)
        return self.head(pooled)  # (batch, num_classes)

    @torch.no_grad()
    def attention_maps(self, patches: torch.Tensor) -> torch.Tensor:
        """Every layer's attention ``(layers, batch, heads, n_tokens, n_tokens)``, eval mode."""
        self.check_inputs(patches)
        with eval_mode(self):
            return self.encoder.attention_maps(self.tokens(patches))


class PixelMLP(nn.Module):
    """Images ``(batch, H, W)`` flattened to ``(batch, H*W)`` -> a 2-layer network -> logits."""

    def __init__(self, n_pixels: int, num_classes: int, hidden: int = 128) -> None:
        super().__init__()
        self.n_pixels = check_positive_int(n_pixels, "n_pixels")
        self.net = nn.Sequential(
            nn.Linear(n_pixels, check_positive_int(hidden, "hidden")), nn.ReLU(),
            nn.Linear(hidden, check_positive_int(num_classes, "num_classes")),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        check_tensor(images, "images", ndim=3, dtype="floating")
        if images.shape[1] * images.shape[2] != self.n_pixels:
            raise ValueError(
                f"images of shape {tuple(images.shape)} have {images.shape[1] * images.shape[2]} "
                f"pixels, the network expects {self.n_pixels}"
            )
        return self.net(images.flatten(1))  # (batch, H*W) -> (batch, num_classes)


class SmallCNN(nn.Module):
    """Two 3×3 convolutions (each pixel sees only its neighbours), pooling, a linear map."""

    def __init__(self, image_size: int, num_classes: int, channels: int = 16) -> None:
        super().__init__()
        self.image_size = check_positive_int(image_size, "image_size")
        channels = check_positive_int(channels, "channels")
        self.features = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1), nn.ReLU(),  # (b, C, H, W)
            nn.Conv2d(channels, 2 * channels, 3, padding=1), nn.ReLU(),  # (b, 2C, H, W)
            nn.MaxPool2d(2),  # (b, 2C, H/2, W/2)
        )
        pooled = 2 * channels * (image_size // 2) ** 2  # features per image after pooling
        self.head = nn.Linear(pooled, check_positive_int(num_classes, "num_classes"))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        check_tensor(images, "images", ndim=3, dtype="floating")
        if tuple(images.shape[1:]) != (self.image_size, self.image_size):
            raise ValueError(
                f"images must have shape (batch, {self.image_size}, {self.image_size}), "
                f"got {tuple(images.shape)}"
            )
        features = self.features(images[:, None])  # (batch, 1, H, W) -> (b, 2C, H/2, W/2)
        return self.head(features.flatten(1))  # (batch, num_classes)

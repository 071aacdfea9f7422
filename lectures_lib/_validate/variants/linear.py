"""The rules of :mod:`lectures_lib.variants.linear` (a learner's feature map is checked at
every call: ``feature_values``).
"""

from __future__ import annotations

import torch

from ...utils import check_qkv, check_tensor
from ..settings import check_settings, settings, tensor

floating_tensor = settings("x", x=tensor(dtype="floating"))


def linear_qkv(q, k, v, feature_map=None, causal=False):
    check_qkv(q, k, v)
    check_settings(causal=causal)
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(
            "causal linear attention needs as many queries as keys (query i sees keys 0 ... i),"
            f" got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    if feature_map is not None:
        feature_map_is_callable(feature_map)


def feature_map_is_callable(feature_map):
    if not callable(feature_map):
        raise TypeError(f"feature_map must be callable, got {type(feature_map).__name__}")


def feature_values(q_features: object, k_features: object, q: torch.Tensor, k: torch.Tensor) -> None:
    """What a feature map returns (run on the learner's map at every call, never trusted):
    floating tensors ``(..., n, f)`` of non-negative features, as many for queries as for keys."""
    pairs = (("queries", q_features, q), ("keys", k_features, k))
    if q_features is k_features:  # one tensor at a time (LinearAttention.features)
        pairs = (("queries or keys", q_features, q),)
    for name, feats, x in pairs:
        if not isinstance(feats, torch.Tensor) or not feats.is_floating_point():
            raise TypeError(
                f"feature_map must return a floating tensor, got {type(feats).__name__} "
                f"for the {name}"
            )
        if feats.shape[:-1] != x.shape[:-1]:
            raise ValueError(
                f"feature_map must keep every dimension but the last: the {name} have shape "
                f"{tuple(x.shape)}, their features {tuple(feats.shape)}"
            )
        if bool((feats < 0).any()):
            raise ValueError(
                f"feature_map must give non-negative features (weights phi(q).phi(k) >= 0), but "
                f"the features of the {name} reach {feats.min().item():.3g}: use "
                "elu_feature_map or another positive map (softmax attention is exp(q.k) > 0)"
            )
    if q_features.shape[-1] != k_features.shape[-1]:
        raise ValueError(
            "feature_map must map queries and keys to the same number of features, got "
            f"{tuple(q_features.shape)} and {tuple(k_features.shape)}"
        )


projection_args = settings("n_features", "d", "orthogonal", "generator", "dtype")


def x_and_projection(x, projection):
    check_tensor(x, "x", dtype="floating")
    if x.dim() < 1:
        raise ValueError("x must have at least 1 dimension (..., d), got a 0-d tensor")
    check_tensor(projection, "projection", ndim=2, dtype="floating")
    if projection.shape[-1] != x.shape[-1]:
        raise ValueError(
            f"projection must have shape (n_features, {x.shape[-1]}) to match x's last "
            f"dimension, got {tuple(projection.shape)} for x of shape {tuple(x.shape)}"
        )

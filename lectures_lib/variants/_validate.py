"""The door checks of the attention variants (private): one named validator per public entry point.

A variant's function or module holds the maths; its arguments are checked here, once, where it is
called from outside the library (``@validated(_validate.local_attention)``, see
:func:`lectures_lib.utils.validated`), as PyTorch keeps ``_mha_shape_check`` apart from the
attention itself. A validator takes the same arguments as the function it guards and raises a
``TypeError`` (wrong kind of thing) or ``ValueError`` (right kind, wrong value) naming the
argument, what was expected and what was given. Constructors call theirs after
``super().__init__``: a module built inside another one is still checked, since the factory that
builds it may come from the learner. Modules check ``forward`` through :func:`variant_inputs`,
which reads the capability flags of :class:`~lectures_lib.variants.base.AttentionVariant`.

Nothing here is taught: read the variant files for the ideas, this file for the rules.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..attention import MultiHeadAttention
from ..utils import (
    check_bool,
    check_device,
    check_non_negative_int,
    check_positive_float,
    check_positive_int,
    check_probability,
    check_qkv,
    check_seed,
    check_tensor,
)
from . import base as _base

# -- shared pieces ------------------------------------------------------------------------------


def key_padding(mask: object, leading_shape: tuple[int, ...] | torch.Size) -> None:
    """A key-padding mask for the efficient functions: bool ``(..., n)`` whose dimensions
    (aligned from the right) equal those of ``leading_shape`` = ``q.shape[:-1]`` or are 1."""
    check_tensor(mask, "key_mask", dtype="bool")
    leading_shape = tuple(leading_shape)
    fits = 1 <= mask.dim() <= len(leading_shape) and mask.shape[-1] == leading_shape[-1]
    if fits:
        fits = all(
            size in (1, target)
            for size, target in zip(reversed(mask.shape), reversed(leading_shape), strict=False)
        )
    if not fits:
        raise ValueError(
            f"key_mask must have shape (..., n) broadcasting to {leading_shape} (the queries' "
            f"leading dimensions, n = {leading_shape[-1]} keys; each dimension equal or 1), got "
            f"{tuple(mask.shape)}"
        )


def _self_attention(q, k, v, need_weights, mask, dropout_p, name: str, why: str = "") -> None:
    """What every efficient self-attention function checks: q, k, v, lengths, flags, key mask."""
    check_qkv(q, k, v)
    if k.shape[-2] != q.shape[-2]:
        raise ValueError(
            f"{name} is self-attention over positions: it needs as many queries as keys{why}, "
            f"got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    check_bool(need_weights, "need_weights")
    if mask is not None:
        key_padding(mask, q.shape[:-1])
    check_probability(dropout_p, "dropout_p")


def _positions(global_positions: object, n: int, name: str = "global_positions") -> None:
    """Positions of global tokens: a sequence of ints or a 1-D integer tensor, each in [0, n)."""
    if isinstance(global_positions, (str, bytes)) or not isinstance(
        global_positions, (torch.Tensor, Sequence)
    ):
        raise TypeError(
            f"{name} must be a list of positions or a 1-D integer tensor, e.g. [0], got "
            f"{type(global_positions).__name__} ({global_positions!r:.40})"
        )
    if not isinstance(global_positions, torch.Tensor):
        values = list(global_positions)  # no dtype forced: 1.5 must fail below, not become 1
        if any(isinstance(p, (str, bytes)) for p in values):
            raise TypeError(f"{name} must hold ints, got {values!r:.60}")
        global_positions = torch.as_tensor(values) if values else torch.zeros(0, dtype=torch.long)
    check_tensor(global_positions, name, ndim=1, dtype="integer")
    if n and global_positions.numel() and not (  # n = 0: an empty result, nothing to place
        0 <= int(global_positions.min()) and int(global_positions.max()) < n
    ):
        raise ValueError(
            f"{name} must lie in [0, {n - 1}] for a sequence of n={n} positions, got "
            f"{global_positions.tolist()}"
        )


def _int_sequence(values: object, name: str, low: int) -> None:
    if isinstance(values, torch.Tensor):
        values = values.tolist()
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a sequence of ints, got {type(values).__name__}")
    check = check_positive_int if low == 1 else check_non_negative_int
    for value in values:
        check(value, f"{name}[...]")


# -- patterns.py --------------------------------------------------------------------------------


def local_mask(n, window, device=None):
    check_positive_int(n, "n")
    check_non_negative_int(window, "window")
    check_device(device)


def stride_mask(n, stride, device=None):
    check_positive_int(n, "n")
    check_positive_int(stride, "stride")
    check_device(device)


def global_mask(n, global_positions, device=None):
    check_positive_int(n, "n")
    _positions(global_positions, n)
    check_device(device)


def dilated_mask(n, window, dilation, device=None):
    local_mask(n, window, device)
    check_positive_int(dilation, "dilation")


def random_keys(n, num_random, seed=0):
    check_positive_int(n, "n")
    check_non_negative_int(num_random, "num_random")
    check_seed(seed)


def random_mask(n, num_random, seed=0, device=None):
    random_keys(n, num_random, seed)
    check_device(device)


def head_patterns(patterns):
    if isinstance(patterns, torch.Tensor) or not isinstance(patterns, Sequence) or not patterns:
        raise TypeError(
            "patterns must be a non-empty list of (n, n) bool masks, one per head, got "
            f"{type(patterns).__name__}"
        )
    first = check_tensor(patterns[0], "patterns[0]", ndim=2, dtype="bool")
    for index, pattern in enumerate(patterns):
        check_tensor(pattern, f"patterns[{index}]", shape=first.shape, dtype="bool")


def receptive_field(mask, num_layers):
    check_tensor(mask, "mask", ndim=(2, 3, 4), dtype="bool")
    check_non_negative_int(num_layers, "num_layers")
    if mask.shape[-1] != mask.shape[-2]:
        raise ValueError(f"mask must be square (..., n, n), got {tuple(mask.shape)}")


# -- local.py -----------------------------------------------------------------------------------


def local_attention(q, k, v, window, *, need_weights=False, key_mask=None, dropout_p=0.0):
    check_qkv(q, k, v)
    check_non_negative_int(window, "window")
    _self_attention(q, k, v, need_weights, key_mask, dropout_p, "local attention",
                    " (query i looks at keys i - window ... i + window)")


def local_module(module, window):
    check_non_negative_int(window, "window")


def band_to_dense(band_weights):
    check_tensor(band_weights, "band_weights", dtype="floating")
    if band_weights.dim() < 2 or band_weights.shape[-1] % 2 == 0:
        raise ValueError(
            "band_weights must have shape (..., n, 2 * window + 1) (an odd last dimension), "
            f"got {tuple(band_weights.shape)}"
        )


# -- sparse.py ----------------------------------------------------------------------------------


def strided_attention(q, k, v, stride, *, need_weights=False, key_mask=None, dropout_p=0.0):
    _self_attention(q, k, v, need_weights, key_mask, dropout_p, "strided_attention")
    check_positive_int(stride, "stride")


def _key_index(index: object, n: int, lead: tuple[int, ...] | None = None) -> None:
    """``key_index``: integer ``(..., n, slots)`` with entries in ``[-1, n)`` (-1 = an empty
    slot); with ``lead`` (the queries' ``(..., n)``) its leading dimensions must broadcast to it."""
    check_tensor(index, "key_index", dtype="integer")
    fits = index.dim() >= 2 and index.shape[-2] == n
    if fits and lead is not None:
        fits = index.dim() - 1 <= len(lead) and all(
            size in (1, target)
            for size, target in zip(reversed(index.shape[:-1]), reversed(lead), strict=False)
        )
    if not fits:
        target = f" broadcasting to {tuple(lead)} + (slots,)" if lead is not None else ""
        raise ValueError(
            f"key_index must have shape (..., n={n}, slots){target}, got {tuple(index.shape)}"
        )
    if index.numel() and not (-1 <= int(index.min()) and int(index.max()) < n):
        raise ValueError(
            f"key_index entries must lie in [-1, {n - 1}] (-1 = empty slot), got values from "
            f"{int(index.min())} to {int(index.max())}"
        )


def sparse_pattern(n, key_index, global_positions=None):
    check_positive_int(n, "n")
    _key_index(key_index, n)
    if global_positions is not None:
        _positions(global_positions, n)


def sparse_attention(q, k, v, key_index, global_positions=None, *, need_weights=False,
                     key_mask=None, dropout_p=0.0):
    _self_attention(q, k, v, need_weights, key_mask, dropout_p, "sparse_attention")
    _key_index(key_index, q.shape[-2], lead=q.shape[:-1])
    if global_positions is not None:
        _positions(global_positions, q.shape[-2])


def global_attention(q, k, v, global_positions, *, need_weights=False, key_mask=None,
                     dropout_p=0.0):
    _self_attention(q, k, v, need_weights, key_mask, dropout_p, "global_attention")
    if global_positions is None:
        raise TypeError(
            "global_positions must be a list of positions or a 1-D integer tensor, e.g. [0], got "
            "None (global attention without global tokens attends to nothing)"
        )
    _positions(global_positions, q.shape[-2])


def longformer(module, window, dilations, global_positions):
    check_non_negative_int(window, "window")
    _int_sequence(dilations, "dilations", low=1)
    if len(dilations) != module.num_heads:
        raise ValueError(
            f"dilations must give one dilation per head (num_heads={module.num_heads}), got "
            f"{len(dilations)}: {list(dilations)}"
        )
    _int_sequence(global_positions, "global_positions", low=0)


def big_bird(module, window, num_random, global_positions, seed):
    check_non_negative_int(window, "window")
    check_non_negative_int(num_random, "num_random")
    _int_sequence(global_positions, "global_positions", low=0)
    check_seed(seed)


# -- clustering.py ------------------------------------------------------------------------------


def random_rotations(d, n_buckets, n_hashes=1, *, heads=None, seed=0):
    check_positive_int(d, "d")
    check_positive_int(n_buckets, "n_buckets")
    check_positive_int(n_hashes, "n_hashes")
    if n_buckets % 2:
        raise ValueError(
            f"n_buckets must be even (a bucket per direction and per opposite), got {n_buckets}"
        )
    if heads is not None:
        check_positive_int(heads, "heads")
    check_seed(seed)


def lsh_buckets(x, rotations):
    check_tensor(x, "x", dtype="floating")
    check_tensor(rotations, "rotations", dtype="floating")
    if x.dim() < 2 or rotations.dim() < 3 or rotations.shape[-2] != x.shape[-1]:
        raise ValueError(
            "x must be (..., n, d) and rotations (..., n_hashes, d, n_buckets / 2) with the "
            f"same d, got x {tuple(x.shape)} and rotations {tuple(rotations.shape)}"
        )


def nearest_centroid(x, centroids):
    check_tensor(x, "x", dtype="floating")
    check_tensor(centroids, "centroids", dtype="floating")
    if x.dim() < 2 or centroids.dim() < 2 or centroids.shape[-2] == 0:
        raise ValueError(
            f"x must have shape (..., n, d) and centroids (..., C >= 1, d), got x "
            f"{tuple(x.shape)} and centroids {tuple(centroids.shape)}"
        )
    if x.shape[-1] != centroids.shape[-1]:
        raise ValueError(
            f"centroids must have the width d = {x.shape[-1]} of x, got centroids "
            f"{tuple(centroids.shape)} for x {tuple(x.shape)}"
        )
    _broadcast(x, centroids, "x", "centroids")


def _broadcast(a, b, name_a, name_b, drop=2):
    try:
        torch.broadcast_shapes(a.shape[:-drop], b.shape[:-drop])
    except RuntimeError:
        raise ValueError(
            f"the leading dimensions of {name_a} {tuple(a.shape)} and {name_b} "
            f"{tuple(b.shape)} must broadcast"
        ) from None


def kmeans(x, n_clusters, num_iters=10, seed=0):
    check_tensor(x, "x", dtype="floating")
    if x.dim() < 2 or x.shape[-2] == 0:
        raise ValueError(f"x must have shape (..., n >= 1, d), got {tuple(x.shape)}")
    check_positive_int(n_clusters, "n_clusters")
    check_non_negative_int(num_iters, "num_iters")
    check_seed(seed)


def cluster_mask(query_clusters, key_clusters):
    check_tensor(query_clusters, "query_clusters", dtype="integer")
    check_tensor(key_clusters, "key_clusters", dtype="integer")
    for name, clusters in (("query_clusters", query_clusters), ("key_clusters", key_clusters)):
        if clusters.dim() < 1:
            raise ValueError(f"{name} must have shape (..., rounds, n), got a 0-d tensor")
    if query_clusters.dim() != key_clusters.dim():
        raise ValueError(
            "query_clusters and key_clusters must have the same number of dimensions "
            f"(..., rounds, n), got {tuple(query_clusters.shape)} and {tuple(key_clusters.shape)}"
        )
    _broadcast(query_clusters, key_clusters, "query_clusters", "key_clusters", drop=1)


def clustered_attention(q, k, v, query_clusters, key_clusters, n_clusters, *,
                        need_weights=False, key_mask=None, dropout_p=0.0):
    check_qkv(q, k, v)
    check_positive_int(n_clusters, "n_clusters")
    check_bool(need_weights, "need_weights")
    check_probability(dropout_p, "dropout_p")
    lead = tuple(q.shape[:-2])
    for name, clusters, n in (("query_clusters", query_clusters, q.shape[-2]),
                              ("key_clusters", key_clusters, k.shape[-2])):
        check_tensor(clusters, name, dtype="integer")
        # One dimension per leading dimension of q, plus the rounds: (batch, n) ids are not
        # silently read as `batch` rounds of hashing.
        fits = clusters.dim() == q.dim() and clusters.shape[-1] == n and all(
            size in (1, target) for size, target in zip(clusters.shape[:-2], lead, strict=True)
        )
        if not fits:
            expected = ", ".join([*(str(s) for s in lead), "rounds", str(n)])
            raise ValueError(
                f"{name} must have shape (..., rounds, {n}) = ({expected}): one dimension per "
                f"leading dimension of q {tuple(q.shape)} (each equal or 1), then the rounds of "
                f"hashing, then the positions; got {tuple(clusters.shape)} (for one round, add "
                "the rounds dimension: clusters[..., None, :])"
            )
        if clusters.numel() and not (0 <= int(clusters.min()) and int(clusters.max()) < n_clusters):
            raise ValueError(
                f"{name} must lie in [0, {n_clusters - 1}] (n_clusters={n_clusters}), got "
                f"values from {int(clusters.min())} to {int(clusters.max())}"
            )
    if query_clusters.shape[-2] != key_clusters.shape[-2]:
        raise ValueError(
            "query_clusters and key_clusters must have the same number of rounds, got "
            f"{tuple(query_clusters.shape)} and {tuple(key_clusters.shape)}"
        )
    if key_mask is not None:
        key_padding(key_mask, k.shape[:-1])


def lsh_module(module, n_buckets, n_hashes, seed):
    random_rotations(module.d_head, n_buckets, n_hashes, seed=seed)


def routing_module(module, n_clusters, decay, seed):
    check_positive_int(n_clusters, "n_clusters")
    check_probability(decay, "decay")
    check_seed(seed)


# -- chunked.py ---------------------------------------------------------------------------------


def _lead(shape, lead, name) -> None:
    if len(shape) > len(lead) or any(
        size not in (1, target) for size, target in zip(reversed(shape), reversed(lead), strict=False)
    ):
        raise ValueError(
            f"the leading dimensions of {name} {tuple(shape)} must equal those of q {tuple(lead)} "
            "or be 1"
        )


def _buckets(buckets, n) -> None:
    check_tensor(buckets, "buckets", dtype="integer")
    if buckets.dim() < 2 or buckets.shape[-1] != n or buckets.shape[-2] == 0:
        raise ValueError(f"buckets must have shape (..., rounds >= 1, {n}), got {tuple(buckets.shape)}")
    if buckets.numel() and int(buckets.min()) < 0:
        raise ValueError(f"buckets must be >= 0 (bucket ids), got a minimum of {int(buckets.min())}")


def _members(members, n, name) -> None:
    check_tensor(members, name, dtype="integer")
    if members.dim() < 2:
        raise ValueError(f"{name} must have shape (..., clusters, size), got {tuple(members.shape)}")
    if members.numel():
        if int(members.min()) < 0 or int(members.max()) >= n:
            raise ValueError(
                f"{name} must hold positions in [0, {n - 1}], got values from "
                f"{int(members.min())} to {int(members.max())}"
            )
        ordered = members.sort(dim=-1).values
        if bool((ordered[..., 1:] == ordered[..., :-1]).any()):
            raise ValueError(f"{name} lists a position twice in one cluster")


def hash_buckets(x, rotations, block=1024):
    lsh_buckets(x, rotations)
    check_positive_int(block, "block")


def lsh_chunk_mask(buckets, chunk_size, *, same_bucket=True):
    check_tensor(buckets, "buckets", dtype="integer")
    if buckets.dim() < 2:
        raise ValueError(f"buckets must have shape (..., rounds, n), got {tuple(buckets.shape)}")
    _buckets(buckets, buckets.shape[-1])
    check_positive_int(chunk_size, "chunk_size")
    check_bool(same_bucket, "same_bucket")


def lsh_chunked_attention(q, k, v, buckets, chunk_size, *, same_bucket=True, exclude_self=False,
                          key_mask=None, dropout_p=0.0):
    _self_attention(q, k, v, False, key_mask, dropout_p, "lsh_chunked_attention",
                    " (queries and keys share one sort order)")
    _buckets(buckets, q.shape[-2])
    _lead(buckets.shape[:-2], q.shape[:-2], "buckets")
    check_positive_int(chunk_size, "chunk_size")
    check_bool(same_bucket, "same_bucket")
    check_bool(exclude_self, "exclude_self")


def balanced_members(x, centroids, size, valid=None):
    check_tensor(x, "x", dtype="floating")
    if valid is not None:
        check_tensor(valid, "valid", dtype=torch.bool)
    check_tensor(centroids, "centroids", dtype="floating")
    if x.dim() < 2 or centroids.dim() < 2 or x.shape[-1] != centroids.shape[-1]:
        raise ValueError(
            f"x must be (..., n, d) and centroids (..., C, d) with the same d, got x "
            f"{tuple(x.shape)} and centroids {tuple(centroids.shape)}"
        )
    check_positive_int(size, "size")
    if size > x.shape[-2]:
        raise ValueError(f"size must be at most n = {x.shape[-2]} (the vectors to choose from), got {size}")


def membership_mask(query_members, key_members, n):
    check_positive_int(n, "n")
    _members(query_members, n, "query_members")
    _members(key_members, n, "key_members")


def balanced_routing_attention(q, k, v, query_members, key_members, *, key_mask=None, dropout_p=0.0):
    _self_attention(q, k, v, False, key_mask, dropout_p, "balanced_routing_attention")
    n = q.shape[-2]
    _members(query_members, n, "query_members")
    _members(key_members, n, "key_members")
    if query_members.shape[-2] != key_members.shape[-2]:
        raise ValueError(
            "query_members and key_members must list the same clusters, got "
            f"{tuple(query_members.shape)} and {tuple(key_members.shape)}"
        )
    _lead(query_members.shape[:-2], q.shape[:-2], "query_members")
    _lead(key_members.shape[:-2], q.shape[:-2], "key_members")


def drop_self(allowed):
    check_tensor(allowed, "allowed", dtype="bool")
    if allowed.dim() < 2 or allowed.shape[-1] != allowed.shape[-2]:
        raise ValueError(f"allowed must be a square mask (..., n, n), got {tuple(allowed.shape)}")


def reformer_module(module, chunk_size, same_bucket, exclude_self):
    check_positive_int(chunk_size, "chunk_size")
    check_bool(same_bucket, "same_bucket")
    check_bool(exclude_self, "exclude_self")


def balanced_routing_module(module, cluster_size):
    if cluster_size is not None:
        check_positive_int(cluster_size, "cluster_size")


# -- linear.py ----------------------------------------------------------------------------------


def elu_feature_map(x):
    check_tensor(x, "x", dtype="floating")


def linear_attention(q, k, v, feature_map=None, causal=False):
    check_qkv(q, k, v)
    check_bool(causal, "causal")
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


def features(q_features: object, k_features: object, q: torch.Tensor, k: torch.Tensor) -> None:
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


def random_projection(n_features, d, orthogonal=True, *, generator=None, dtype=torch.float32):
    check_positive_int(n_features, "n_features")
    check_positive_int(d, "d")
    check_bool(orthogonal, "orthogonal")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator or None, got {type(generator).__name__}"
        )


def performer_features(x, projection):
    check_tensor(x, "x", dtype="floating")
    if x.dim() < 1:
        raise ValueError("x must have at least 1 dimension (..., d), got a 0-d tensor")
    check_tensor(projection, "projection", ndim=2, dtype="floating")
    if projection.shape[-1] != x.shape[-1]:
        raise ValueError(
            f"projection must have shape (n_features, {x.shape[-1]}) to match x's last "
            f"dimension, got {tuple(projection.shape)} for x of shape {tuple(x.shape)}"
        )


def performer(module, n_features, orthogonal):
    check_positive_int(n_features, "n_features")
    check_bool(orthogonal, "orthogonal")


# -- sinkhorn.py, low_rank.py, synthesizer.py ---------------------------------------------------


def sinkhorn(log_scores, n_iters=8):
    check_tensor(log_scores, "log_scores", dtype="floating")
    if log_scores.dim() < 2 or log_scores.shape[-1] != log_scores.shape[-2]:
        raise ValueError(
            "log_scores must have shape (..., n, n) (a square matrix per block pair), got "
            f"{tuple(log_scores.shape)}"
        )
    check_positive_int(n_iters, "n_iters")


def sinkhorn_module(module, block_size, n_iters, temperature):
    check_positive_int(block_size, "block_size")
    check_positive_int(n_iters, "n_iters")
    check_positive_float(temperature, "temperature")


def linformer(module, seq_len, k, share_kv):
    check_positive_int(seq_len, "seq_len")
    check_positive_int(k, "k")
    check_bool(share_kv, "share_kv")


def compressed(module, stride):
    check_positive_int(stride, "stride")


def synthesizer(module, seq_len, hidden=None, fixed=False):
    check_positive_int(seq_len, "seq_len")
    if hidden is not None:
        check_positive_int(hidden, "hidden")
    check_bool(fixed, "fixed")


# -- the modules' forward (AttentionVariant.check_inputs) ---------------------------------------

_SUPPORTED = {
    "keys": "key padding (the same keys for every query)",
    "keys and causal": "key padding (the same keys for every query) and the causal mask, with "
    "or without key padding",
}


def variant_inputs(module, query, key, value, mask, need_weights) -> None:
    """``forward`` of a variant: what ``MultiHeadAttention`` checks (shapes, the module's dtype,
    the mask), then what its capability flags (``self_attention_only``, ``masks``, ``seq_len``)
    allow."""
    MultiHeadAttention.check_inputs(module, query, key, value, mask, need_weights)  # dtype too
    name = type(module).__name__
    if module.self_attention_only and query.shape[1] != key.shape[1]:
        raise ValueError(
            f"{name} is self-attention: it needs as many queries as keys (query and key of the "
            f"same length), got query {tuple(query.shape)} and key {tuple(key.shape)}"
        )
    seq_len = getattr(module, "seq_len", None)
    for what, x in (("query", query), ("key", key)):
        if seq_len is not None and what in module.seq_len_limits and x.shape[1] > seq_len:
            raise ValueError(
                f"{name} was built for seq_len={seq_len} ({module.seq_len_reason}), got {what} "
                f"of shape {tuple(x.shape)} with {x.shape[1]} positions"
            )
    positions = getattr(module, "global_positions", ())
    if positions and query.shape[1] and max(positions) >= query.shape[1]:
        raise ValueError(
            f"global_positions={list(positions)} of {name} must lie inside the sequence, but "
            f"query has only n={query.shape[1]} positions (shape {tuple(query.shape)})"
        )
    if mask is not None and module.masks != "any":
        module.supported_mask(mask, query.shape[1], key.shape[1])


def mask_support(module, mask, kind: str) -> None:
    """Refuse a mask the variant cannot honour (its ``masks`` flag), naming the variant."""
    if kind == "full" and module.masks != "any" or kind == "causal" and module.masks == "keys":
        shape = tuple(_base._as_4d(mask).shape)
        raise ValueError(
            f"{type(module).__name__} never builds the N x N matrix, so it can only honour "
            f"{_SUPPORTED[module.masks]}; got a mask of shape {shape} that differs from query to "
            "query in another way"
            + (" (a causal mask is not supported by this variant)" if module.masks == "keys" else "")
        )

"""lectures_lib.masks: the two everyday masks and the check every mask goes through."""

import pytest
import torch

from lectures_lib.attention import MultiHeadAttention, scaled_dot_product_attention
from lectures_lib.masks import check_mask

# causal_mask and key_padding_mask's values are tested in test_contract.py (written from the spec);
# their refusals of bad lengths and mask dtypes are rows of test_bad_inputs.py.


def test_check_mask_returns_a_mask_that_fits():
    # (The shapes that would broadcast silently, a (batch, n_k) padding mask against 4-D scores,
    # a transposed mask, are refused: rows of tests/test_bad_inputs.py.)
    ok = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    assert check_mask(ok, (2, 4, 3, 5)) is ok


@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 3, 5), (3, 3, 5), (1, 1, 5)], ids=str)
def test_three_dimensional_masks_are_refused_for_multi_head_scores(shape):
    # (batch, n_q, n_k) and (heads, n_q, n_k) look the same when batch == heads: refuse, and show
    # both ways to say what is meant, in check_mask and in every attention that uses it.
    mask = torch.ones(shape, dtype=torch.bool)
    q, k, v = (torch.randn(2, 3, n, 6) for n in (3, 5, 5))  # scores (2, 3, 3, 5)
    for refuse in (lambda: check_mask(mask, (2, 3, 3, 5)),
                   lambda: scaled_dot_product_attention(q, k, v, mask)):
        with pytest.raises(ValueError) as error:
            refuse()
        message = str(error.value)
        assert str(shape) in message and "mask[:, None]" in message and "mask[None]" in message
    x = torch.randn(2, 3, 6)
    with pytest.raises(ValueError, match=r"mask\[:, None\]"):
        MultiHeadAttention(6, 3)(x, x, x, torch.ones(2, 3, 3, dtype=torch.bool))


def test_three_dimensional_masks_fit_single_head_scores_and_one_dimensional_ones_any():
    ok = torch.ones(2, 3, 5, dtype=torch.bool)  # single-head scores are 3-D: no ambiguity
    assert check_mask(ok, (2, 3, 5)) is ok
    keys_only = torch.ones(5, dtype=torch.bool)
    assert check_mask(keys_only, (2, 2, 3, 5)) is keys_only

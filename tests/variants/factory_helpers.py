"""Train a variant through the attention factory on a toy task where it should succeed, and check
that causal variants inside the Transformer's decoder never look ahead."""

from __future__ import annotations

import torch

from lectures_lib.data import retrieval_task, retrieval_vocab_size
from lectures_lib.models import EncoderTagger, Transformer
from lectures_lib.training import evaluate, fit


def last_position(model, batch):
    tokens, labels = batch
    return model(tokens)[:, -1], labels  # (batch, n_values): the query's logits


def retrieval_accuracy(factory, seq_len=16, epochs=12, seed=0, n_keys=4):
    """Held-out accuracy on the retrieval task after a short training (chance = 1 / 4).
    ``n_keys=1`` is the easy version: one pair, found without comparing keys."""
    torch.manual_seed(seed)
    train = retrieval_task(512, seq_len, n_keys=n_keys, seed=seed)
    test = retrieval_task(256, seq_len, n_keys=n_keys, seed=seed + 1000)
    model = EncoderTagger(retrieval_vocab_size(n_keys), 4, d_model=32, num_heads=2,
                          num_layers=1, d_ff=64, max_len=seq_len, attention=factory)
    fit(model, train, epochs=epochs, batch_size=32, lr=3e-3, schedule="constant", forward_fn=last_position,
        progress=False, device=torch.device("cpu"))
    return evaluate(model, test, forward_fn=last_position, device=torch.device("cpu"))


def previous_token_accuracy(factory, seq_len=12, epochs=20, vocab=8):
    """Label of position i = token at i - 1 (a fixed pattern: no content needed to find it)."""
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(1, vocab, (512, seq_len), generator=generator)
    labels = torch.cat([torch.zeros(512, 1, dtype=torch.long), tokens[:, :-1]], dim=1)
    model = EncoderTagger(vocab, vocab, d_model=32, num_heads=2, num_layers=1, d_ff=64,
                          max_len=seq_len, attention=factory)
    fit(model, (tokens[:384], labels[:384]), epochs=epochs, batch_size=16, lr=1e-2, schedule="constant",
        progress=False, device=torch.device("cpu"))
    return evaluate(model, (tokens[384:], labels[384:]), device=torch.device("cpu"))


def decoder_is_causal(factory, n=10):
    """A Transformer with ``factory`` as its decoder self-attention: changing target token j must
    not change the output at positions < j; it must change some position >= j. Trains one step
    (gradients reach the variant's parameters)."""
    torch.manual_seed(0)
    model = Transformer(11, 13, d_model=16, num_heads=2, num_encoder_layers=1,
                        num_decoder_layers=1, d_ff=32, max_len=n, decoder_attention=factory).eval()
    src = torch.randint(1, 11, (2, n))
    tgt = torch.randint(1, 13, (2, n))
    logits = model(src, tgt)
    assert logits.shape == (2, n, 13)
    j = n // 2
    changed = tgt.clone()
    changed[:, j] = (changed[:, j] % 12) + 1
    new_logits = model(src, changed)
    torch.testing.assert_close(new_logits[:, :j], logits[:, :j],
                               msg="a later target token changed an earlier output")
    assert not torch.allclose(new_logits[:, j:], logits[:, j:]), "the changed token had no effect"
    model.train()
    model(src, tgt).sum().backward()
    attention = model.decoder.layers[0].self_attn
    grads = [p.grad for p in attention.parameters() if p.requires_grad]
    assert any(g is not None and bool(g.abs().sum() > 0) for g in grads)
    return True

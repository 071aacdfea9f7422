"""Whether a model's *trained weights* earn its score (the tests of
:mod:`lectures_lib.checks.trained` after a model passes): shuffled, left one in, perturbed.

Only ``state_dict()`` tensors cross the grader's process boundary, so every test here works on a
copy of them and puts the model's own weights back."""

from __future__ import annotations

import torch

from ._base import Mistake, call, probe_generator


def _state(model) -> dict[str, torch.Tensor]:
    """A copy of ``model.state_dict()`` (only tensors cross the grader's process boundary)."""
    state_dict = getattr(model, "state_dict", None)
    load_state_dict = getattr(model, "load_state_dict", None)
    if not (callable(state_dict) and callable(load_state_dict)):
        raise Mistake("not_a_model", "your training function should return the trained model "
                      "(a torch.nn.Module, in eval mode); a function or a hand-written rule is "
                      "not a trained model.")
    state = call(state_dict)
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise Mistake("not_a_model", "the model's state_dict() should map names to tensors.")
    return {name: value.detach().clone() for name, value in state.items()}  # not the live ones


# How much of each weight tensor's size (root mean square) the perturbation test adds as noise,
# and how far a trained model's accuracy may move under it.
PERTURBATION, PERTURBATION_SLACK = 1e-3, 0.05
MAX_GROUPS = 32  # the leave-one-in test keeps one group of tensors intact at a time


def _shuffled(value: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return value.flatten()[torch.randperm(value.numel(), generator=generator)].view_as(value)


def _weights_do_the_work(model, score, needed: float, unit: str, *, outputs=None) -> None:
    """Raise :class:`Mistake` unless ``model`` is a module whose *trained weights* earn its score.

    ``score()`` evaluates the model on the held-out data. The weights are shuffled (each tensor's
    entries permuted with a fixed seed), the model is scored again, and its own weights are put
    back: a trained model falls far below ``needed``; a hand-written rule (``src.flip(-1)``, a
    sort) scores the same without any weights that matter. Works across the grader's process
    boundary: only ``state_dict()`` tensors cross.

    ``outputs`` (given for a model of the student's own architecture, whose forward code runs:
    ``outputs()`` is its logits on the held-out data, what ``score()`` scores): a rule
    that answers only while one "key" tensor is intact (garbage once it is shuffled) passes the
    test above, so two more follow. *Leave one in*: for each tensor (each of at most
    :data:`MAX_GROUPS` groups of them) every *other* tensor is shuffled, and the model must fall
    below ``needed``: a trained model needs its weights together, not one tensor of them.
    *Perturbed*: noise of :data:`PERTURBATION` times each tensor's size is added to every weight;
    a trained model's logits change and its score hardly moves (at most
    :data:`PERTURBATION_SLACK`), while a switch on exact values collapses, and logits that stay
    bit for bit the same are not computed from the weights at all."""
    state = _state(model)
    load_state_dict = model.load_state_dict
    if not any(v.is_floating_point() and v.numel() > 1 for v in state.values()):
        raise Mistake("not_a_model", "the model has no trained weights (its state_dict() holds "
                      "no floating-point tensor): a hand-written rule is not a trained model.")
    generator = probe_generator(31337, "shuffle")
    shuffled = {name: _shuffled(value, generator) if value.is_floating_point() else value
                for name, value in state.items()}

    def scored(weights: dict) -> float:
        call(load_state_dict, weights)
        return score()

    try:
        scrambled = scored(shuffled)
        if scrambled >= needed:
            raise Mistake("not_a_model", f"with its weights shuffled the model still reaches a "
                          f"held-out {unit} of {scrambled:.3f} (>= {needed:.2f}): its answers do "
                          "not come from its trained weights. Build the model from attention "
                          "layers and train it; a hand-written rule is not a trained model.")
        if outputs is not None:
            _each_tensor_alone(state, shuffled, scored, needed, unit)
            _perturbed(state, scored, outputs, unit)
    finally:
        call(load_state_dict, state)


def _each_tensor_alone(state: dict, shuffled: dict, scored, needed: float, unit: str) -> None:
    """The leave-one-in test of :func:`_weights_do_the_work`."""
    names = [name for name, value in state.items() if not torch.equal(value, shuffled[name])]
    groups = [names[i::MAX_GROUPS] for i in range(min(MAX_GROUPS, len(names)))]
    for group in groups:
        kept = scored({**shuffled, **{name: state[name] for name in group}})
        if kept >= needed:
            alone = ", ".join(f"`{name}`" for name in group[:3]) + (" ..." if group[3:] else "")
            raise Mistake(
                "one_tensor_decides",
                f"with every weight shuffled except {alone} the model still reaches a held-out "
                f"{unit} of {kept:.3f} (>= {needed:.2f}): its answers come from a rule that "
                "needs only those values intact, not from weights trained together. Build the "
                "model from layers (an embedding, attention, a feed-forward) and train them.")


def _perturbed(state: dict, scored, outputs, unit: str) -> None:
    """The perturbation test of :func:`_weights_do_the_work`."""
    generator = probe_generator(31337, "perturb")
    noisy = {}
    for name, value in state.items():
        if value.is_floating_point():
            size = float(value.double().square().mean().sqrt()) or 1.0
            noise = torch.randn(value.shape, generator=generator, dtype=torch.float64)
            value = (value.double() + PERTURBATION * size * noise).to(value.dtype)
        noisy[name] = value
    accuracy, logits = scored(state), outputs()
    perturbed, moved = scored(noisy), outputs()
    if perturbed < accuracy - PERTURBATION_SLACK:
        raise Mistake(
            "fragile_weights",
            f"noise of {PERTURBATION:g} times each weight tensor's size took the held-out {unit} "
            f"from {accuracy:.3f} to {perturbed:.3f}: a trained model barely notices so small a "
            "change; a rule that answers only while its weights hold exact values does. Train "
            "the weights; do not test them.")
    if torch.equal(logits, moved):
        raise Mistake(
            "fragile_weights",
            f"noise of {PERTURBATION:g} times each weight tensor's size left every logit exactly "
            "as it was: the model's answers are not computed from its weights. Build the model "
            "from layers and train them; a hand-written rule is not a trained model.")

import torch
import torch.nn.functional as F

from conftest import TINY
from nmtrepro.models import build_model
from nmtrepro.models.layers import recording_heads

from nmtrepro.core.vocab import IndexedData, Vocab, save_indexed
from nmtrepro.training.batching import collate, token_batches
from nmtrepro.training.criterion import label_smoothed_loss, model_loss, output_agreement
from nmtrepro.training.schedule import constant, inverse_sqrt


def test_label_smoothing_matches_torch_definition():
    torch.manual_seed(0)
    logits, target = torch.randn(7, 11), torch.randint(0, 11, (7,))
    loss, nll = label_smoothed_loss(logits, target, 0.1)
    assert torch.allclose(loss, F.cross_entropy(logits, target, label_smoothing=0.1, reduction="sum"))
    assert torch.allclose(nll, F.cross_entropy(logits, target, reduction="sum"))


def test_label_smoothing_zero_is_plain_nll():
    logits, target = torch.randn(3, 5), torch.tensor([0, 4, 2])
    loss, nll = label_smoothed_loss(logits, target, 0.0)
    assert torch.allclose(loss, nll)


def test_output_agreement_by_hand():
    """Two heads over a 3-token sentence whose last token is padding (Li et al. 2018, Eq. 8 negated).
    Head 1 outputs (1, 0) then (0, 1), head 2 (1, 0) then (0, -1): flattened over the two real tokens
    they are (1, 0, 0, 1) and (1, 0, 0, -1), cosine 0; the padding row (huge) must not count. With the
    two self-similarities (1) the mean over the 2 x 2 pairs is 1/2; a second sentence whose heads are
    equal adds 1."""
    outputs = torch.tensor([[[[1.0, 0.0], [0.0, 1.0], [50.0, 50.0]], [[1.0, 0.0], [0.0, -1.0], [-9.0, 3.0]]],
                            [[[2.0, 1.0], [1.0, 1.0], [0.0, 0.0]], [[2.0, 1.0], [1.0, 1.0], [0.0, 0.0]]]])
    pad = torch.tensor([[False, False, True], [False, False, False]])
    assert torch.isclose(output_agreement(outputs, pad), torch.tensor(1.5))


def test_disagreement_adds_lambda_times_the_mean_agreement_of_encoder_layers():
    torch.manual_seed(0)
    plain = build_model({**TINY, "src_vocab": 12, "tgt_vocab": 12})
    disreg = build_model({**TINY, "src_vocab": 12, "tgt_vocab": 12, "disagreement": 0.5})
    disreg.load_state_dict(plain.state_dict())      # DisReg adds no weights
    src = torch.tensor([[4, 5, 6, Vocab.eos], [7, 8, Vocab.eos, 0]])
    prev, target = torch.tensor([[1, 4, 5], [1, 6, 0]]), torch.tensor([[4, 5, Vocab.eos], [6, Vocab.eos, 0]])
    base_loss, base_nll = model_loss(plain, {"src": src}, prev, target, 0.1)
    loss, nll = model_loss(disreg, {"src": src}, prev, target, 0.1)
    with recording_heads([layer.self_attn.sublayer for layer in plain.encoder]) as recorded:
        plain.encode(src)
    agreement = torch.stack([output_agreement(calls[0], src.eq(0)) for calls in recorded]).mean()
    assert len(recorded) == TINY["encoder_layers"]
    assert torch.isclose(nll, base_nll) and torch.isclose(loss, base_loss + 0.5 * agreement)
    loss.backward()                                  # the term reaches the encoder's projections
    attentions = [layer.self_attn.sublayer for layer in disreg.encoder]
    assert all(a.q_proj.weight.grad.abs().sum() > 0 and a.head_outputs is None for a in attentions)


def test_inverse_sqrt_schedule_warms_up_then_decays():
    assert inverse_sqrt(1, 1.0, 100) == 0.01
    assert inverse_sqrt(100, 1.0, 100) == 1.0
    assert inverse_sqrt(400, 1.0, 100) == 0.5
    noam_peak = 512 ** -0.5 * 4000 ** -0.5   # Vaswani et al.: d^-0.5 * min(s^-0.5, s * w^-1.5)
    assert abs(inverse_sqrt(8000, noam_peak, 4000) - 512 ** -0.5 * 8000 ** -0.5) < 1e-12


def test_constant_schedule_warms_up_then_stays():
    assert [constant(s, 1.0, 100) for s in (0, 1, 50, 100, 5000)] == [0.01, 0.01, 0.5, 1.0, 1.0]


def test_token_batches_respect_budget_and_cover_every_sentence():
    sizes = [3, 9, 4, 4, 12, 2, 7, 7, 5, 1]
    batches = token_batches(sizes, sizes, max_tokens=16, seed=3, epoch=0)
    assert sorted(i for b in batches for i in b) == list(range(len(sizes)))
    for b in batches:
        assert len(b) == 1 or max(sizes[i] for i in b) * len(b) <= 16


def test_token_batches_depend_only_on_seed_and_epoch():
    sizes = list(range(1, 40))
    def plan(seed, epoch):
        return list(token_batches(sizes, sizes, 32, seed=seed, epoch=epoch))
    assert plan(1, 2) == plan(1, 2)
    assert plan(1, 2) != plan(1, 3)


def test_collate_pads_and_shifts_target(tmp_path):
    save_indexed(tmp_path / "s.bin", [[5, 6, 2], [7, 2]])
    save_indexed(tmp_path / "t.bin", [[8, 2], [9, 10, 11, 2]])
    b = collate(IndexedData(tmp_path / "s.bin"), IndexedData(tmp_path / "t.bin"), [0, 1])
    assert b.net_input == {"src": b.net_input["src"]}  # a plain Transformer reads the ids only
    assert b.net_input["src"].tolist() == [[5, 6, 2], [7, 2, Vocab.pad]]
    assert b.target.tolist() == [[8, 2, 0, 0], [9, 10, 11, 2]]
    assert b.prev.tolist() == [[1, 8, 0, 0], [1, 9, 10, 11]]
    assert b.tgt_tokens == 6

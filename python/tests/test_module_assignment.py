"""What is assigned to a layer is what its forward uses (issue 37, item 4): a Parameter (weight tying, as PyTorch's
word-language-model example) and the training flag."""
import strata
from strata import nn


def test_weight_tying_makes_the_layer_read_the_assigned_parameter():
    emb = nn.Embedding(5, 3)
    dec = nn.Linear(3, 5, bias=False)
    dec.weight = emb.weight
    x = strata.ones(1, 3)
    expected = (x @ emb.weight.detach().t()).tolist()
    assert dec(x).tolist() == expected
    assert len(list(nn.ModuleList([emb, dec]).parameters())) == 1


def test_a_tied_weight_gets_the_gradients_of_both_users():
    emb = nn.Embedding(4, 2)
    dec = nn.Linear(2, 4, bias=False)
    dec.weight = emb.weight
    idx = strata.tensor([1])
    out = dec(emb(idx))
    out.sum().backward()
    # d/dW of sum(W e_1 . W^T): the Linear's part (every row gets e) plus the Embedding's (row 1 gets the column sums).
    w = emb.weight.detach()
    e = w[1]
    linear_part = [[float(v) for v in e.tolist()] for _ in range(4)]
    embedding_part = [[0.0, 0.0] for _ in range(4)]
    embedding_part[1] = w.sum(0).tolist()
    expected = [[a + b for a, b in zip(r1, r2)] for r1, r2 in zip(linear_part, embedding_part)]
    got = emb.weight.grad.tolist()
    assert all(abs(g - x) < 1e-5 for rg, rx in zip(got, expected) for g, x in zip(rg, rx))


def test_setting_training_directly_stops_dropout():
    drop = nn.Dropout(0.5)
    drop.training = False
    x = strata.ones(1000)
    assert drop(x).tolist() == x.tolist()
    drop.training = True
    assert drop(x).tolist() != x.tolist()


def test_deepcopy_of_a_model_is_independent_and_equal():
    import copy
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.BatchNorm1d(4), nn.Linear(4, 2))
    model.eval()
    twin = copy.deepcopy(model)
    x = strata.randn(5, 3)
    assert twin(x).tolist() == model(x).tolist()
    assert not twin.training and not twin[2].training
    with strata.no_grad():
        twin[0].weight.fill_(0.0)
    assert twin(x).tolist() != model(x).tolist()
    assert all(p is not q for p, q in zip(twin.parameters(), model.parameters()))


def test_deepcopy_keeps_a_tied_weight_tied():
    import copy
    emb = nn.Embedding(5, 3)
    dec = nn.Linear(3, 5, bias=False)
    dec.weight = emb.weight
    pair = copy.deepcopy(nn.ModuleList([emb, dec]))
    assert pair[0].weight is pair[1].weight
    x = strata.ones(1, 3)
    assert pair[1](x).tolist() == dec(x).tolist()

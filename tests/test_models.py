"""The training models: shapes, parameter counts (WRN-16-4 has 2.75 M), per-example independence, errors."""

import pytest
import torch

from dputils.errors import DPValueError
from dputils.training import clip_rows, per_sample_gradients
from dputils.training.models import make_model, small_cnn, wide_resnet


def _count(model):
    return sum(p.numel() for p in model.parameters())


def test_wrn16_4_parameter_count_and_output_shape():
    model = wide_resnet(16, 4)
    # 2 748 890 parameters: the published WRN-16-4 count (2.7 M) with GroupNorm affine terms in place of BatchNorm
    assert 2.70e6 < _count(model) < 2.80e6
    with torch.no_grad():
        out = model(torch.zeros(2, 3, 32, 32))
    assert out.shape == (2, 10)


def test_groupnorm_keeps_examples_independent():
    # BatchNorm would make example 0's output depend on example 1; GroupNorm must not
    torch.manual_seed(0)
    model = small_cnn().eval()
    x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        a = model(x)[0]
        x2 = x.clone()
        x2[1:] = torch.randn(2, 3, 32, 32) * 5
        b = model(x2)[0]
    torch.testing.assert_close(a, b)


def test_per_sample_gradients_of_the_cnn_match_one_by_one_backward():
    torch.manual_seed(1)
    model = small_cnn()
    params = {k: v.detach() for k, v in model.named_parameters()}
    X = torch.randn(3, 3, 32, 32)
    y = torch.tensor([0, 3, 7])
    G = per_sample_gradients(model, params, X, y)
    for i in range(3):
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(X[i : i + 1]), y[i : i + 1]).backward()
        g = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        torch.testing.assert_close(G[i], g, rtol=1e-4, atol=1e-6)
    assert torch.all(torch.linalg.vector_norm(clip_rows(G, 0.5), dim=1) <= 0.5 + 1e-6)


def test_make_model_and_errors():
    assert isinstance(make_model("mlp", in_dim=4, n_classes=3), torch.nn.Module)
    with pytest.raises(DPValueError, match="model"):
        make_model("resnet50")
    with pytest.raises(DPValueError, match="in_dim"):
        make_model("mlp")
    with pytest.raises(DPValueError, match="depth"):
        wide_resnet(15, 4)

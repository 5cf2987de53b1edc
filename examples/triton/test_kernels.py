"""The Triton examples as pytest tests, through klab.testing: the correct kernels pass
`klab check`, every labelled bug is rejected with klab's verdict. KLAB_TRITON_OUT names the
folder export.py wrote (skipped when unset):

    python3 examples/triton/export.py build/triton
    KLAB_TRITON_OUT=build/triton python3 -m pytest examples/triton/test_kernels.py
"""

import os

import pytest

from klab.testing import check

OUT = os.environ.get("KLAB_TRITON_OUT")
pytestmark = pytest.mark.skipif(not OUT, reason="KLAB_TRITON_OUT names no export.py folder")

CORRECT = ["softmax_triton", "layer_norm_triton", "matmul_triton", "softmax_cuda"]
BUGS = [
    "softmax_tail_unmasked",
    "softmax_no_max",
    "layer_norm_tail_in_variance",
    "layer_norm_one_chunk",
    "matmul_k_tail_unmasked",
]


@pytest.mark.parametrize("name", CORRECT)
def test_a_correct_kernel_passes_every_case(name):
    check(os.path.join(OUT, f"{name}.toml"))


@pytest.mark.parametrize("name", BUGS)
def test_a_labelled_bug_is_rejected(name):
    with pytest.raises(pytest.fail.Exception) as failed:
        check(os.path.join(OUT, f"{name}.toml"))
    # Found by the oracle, case by case: a known-broken kernel is refused by its label
    # alone, so the label is not the evidence.
    assert f"{name}: " in str(failed.value) and " cases fail" in str(failed.value)

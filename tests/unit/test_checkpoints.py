"""module_utils/triton_fleet/checkpoints.py: which pre-quantized checkpoint a plan loads, and where it loads."""

import pytest
from triton_fleet import checkpoints as ck
from triton_fleet import model_catalog as mc

REV = "0123456789abcdef0123456789abcdef01234567"


def model(key="qwen3-14b", **kw):
    return dict(mc.get(key), **kw)


def test_every_catalog_format_is_known_and_carries_its_precision():
    for key in mc.QUANTIZED:
        for c in mc.quantized_checkpoints(key):
            fmt = ck.FORMATS[c["format"]]
            assert fmt["precision"] in (None, c["precision"]), c
            assert c["hf_id"].startswith("Qwen/") and c["hf_id"].startswith(mc.MODELS[key]["hf_id"]), c


@pytest.mark.parametrize("cc,family", [("8.0", "Ampere"), ("8.6", "Ampere"), ("8.9", "Ada"), ("9.0", "Hopper"),
                                       ("10.0", "Blackwell SM100/SM103"), ("10.3", "Blackwell SM100/SM103"),
                                       ("12.0", "Blackwell SM120"), ("7.5", None)])
def test_families_of_the_hardware_matrix(cc, family):
    assert ck.family(cc) == family


@pytest.mark.parametrize("cc,loads", [("9.0", True), ("10.0", True), ("8.9", False), ("12.0", False), ("8.0", False)])
def test_qwens_fp8_loads_where_fp8_block_scaling_runs(cc, loads):
    got, why = ck.resolve(model(), "fp8", cc, {"fp8": {"revision": REV}})
    if loads:
        assert got == {"key": "qwen3-14b-fp8", "hf_id": "Qwen/Qwen3-14B-FP8", "revision": REV, "precision": "fp8",
                       "format": "fp8-block128", "source": "catalog"}
        assert "Qwen's own fp8 of Qwen/Qwen3-14B" in why and "FP8_BLOCK_SCALES" in why
    else:
        assert got is None and "loads on Hopper, Blackwell SM100/SM103 only" in why


def test_qwens_awq_is_autoawq_which_the_pytorch_backend_refuses():
    got, why = ck.resolve(model(), "int4_awq", "8.6")
    assert got is None
    assert "Qwen/Qwen3-14B-AWQ is AutoAWQ" in why and "Unsupported quantization_config" in why
    assert "triton_fleet_quantized_checkpoints.int4_awq" in why and "modelopt-w4a16-awq" in why


def test_an_operator_export_is_loaded_where_its_recipe_runs():
    op = ck.parse({"int4_awq": {"repo": "example-org/Qwen3-14B-W4A16", "revision": REV, "format": "modelopt-w4a16-awq"}})
    got, _ = ck.resolve(model(), "int4_awq", "8.6", op)
    assert got == {"key": "qwen3-14b-w4a16", "hf_id": "example-org/Qwen3-14B-W4A16", "revision": REV,
                   "precision": "int4_awq", "format": "modelopt-w4a16-awq", "source": "operator"}
    # upstream's matrix has no W4A16 AWQ on Blackwell
    got, why = ck.resolve(model(), "int4_awq", "10.0", op)
    assert got is None and "Ampere, Ada, Hopper only" in why


def test_no_checkpoint_at_all_is_said():
    got, why = ck.resolve(model("qwen3-30b-a3b"), "int4_awq", "9.0")
    assert got is None and "Qwen publishes none" in why and "triton_fleet_quantized_checkpoints.int4_awq" in why


def test_an_unpinned_revision_stays_unset_and_the_message_says_what_to_set():
    got, _ = ck.resolve(model(), "fp8", "9.0")
    assert got["revision"] is None
    assert ck.unpinned_message(got) == ("the pre-quantized checkpoint Qwen/Qwen3-14B-FP8 (fp8 weights) has no pinned "
                                        "revision: set triton_fleet_quantized_checkpoints.fp8.revision to the commit of "
                                        "Qwen/Qwen3-14B-FP8 to serve (its full hash, 40 hex characters)")


@pytest.mark.parametrize("rev,ok", [(REV, True), ("main", False), ("v1.0", False), (REV[:12], False),
                                    (REV.upper(), False), (None, False)])
def test_pinned_means_a_full_commit_hash(rev, ok):
    assert ck.pinned(rev) is ok


def test_catalog_checkpoints_belong_to_qwens_weights_only():
    assert ck.official(model()) and ck.official(model(hf_id="example-org/ft")) == []
    assert ck.official({"key": "qwen3-tiny", "hf_id": None}) == []


def test_empty_values_mean_no_map():
    for value in (None, "", {}):
        assert ck.parse(value) == {}
    assert ck.parse({"fp8": {"revision": REV, "repo": "", "format": None}}) == {"fp8": {"revision": REV}}
